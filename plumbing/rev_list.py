"""`reel rev-list`: the history of records, journal entries and views; with --objects, everything reachable."""

from __future__ import annotations

import itertools

import click

from reelstore import revisions
from reelstore.cli.complete import REVISIONS
from reelstore.cli.context import Context, pass_ctx
from reelstore.errors import NotFound, StorageError
from reelstore.kernel.history import MAX_LIMIT
from reelstore.maintenance.reach import ref_roots, walk
from reelstore.objects import Object


@click.command("rev-list")
@click.option(
    "--objects",
    "objects",
    is_flag=True,
    help="Every object reachable (through every kind's references), as `ID [NAME]`.",
)
@click.option("--all", "all_refs", is_flag=True, help="Start from every ref.")
@click.option(
    "-n", "--max-count", "limit", type=click.IntRange(1, MAX_LIMIT), help="Without --objects: at most N entries."
)
@click.argument("refs", nargs=-1, shell_complete=REVISIONS)
@pass_ctx
def rev_list(ctx: Context, objects: bool, all_refs: bool, limit: int | None, refs: tuple[str, ...]) -> None:
    """List what REFs (revisions: ids, prefixes, ref names, NAME~N, NAME@{N}; A..B, A...B or ^A to exclude)
    lead to. Without --objects: the hash chains, newest first (records by parent, journal entries by
    prev, views by base). Exit 4 if something is missing."""
    repo = ctx.repo
    tips, hidden = revisions.select(repo, refs)
    roots = [*(ref_roots(repo.refs, None) if all_refs else []), *tips]
    if not roots:
        raise click.UsageError("name at least one REF, or --all")
    if not objects:
        chain = revisions.selected(repo, roots, hidden)
        ids = [obj.id.hex() for obj in itertools.islice(chain, limit)]
        ctx.emit(ids, "\n".join(ids))
        return
    if hidden:
        raise click.UsageError("--objects takes no ranges (A..B, A...B) or ^EXCLUDED names")
    order: list[Object] = []
    w = walk(repo.objects, roots, on_object=order.append)
    rows = [(obj.id.hex(), w.hints.get(obj.id, "")) for obj in order]
    ctx.emit([{"id": h, "name": n} for h, n in rows], "\n".join(f"{h} {n}".rstrip() for h, n in rows))
    if w.damaged:
        h, msg = next(iter(w.damaged.items()))
        raise StorageError(msg, id=h)
    if w.missing:
        h, via = next(iter(w.missing.items()))
        raise NotFound(f"object {h.hex()} (referenced by {via}) is missing", id=h)


COMMANDS = [rev_list]
