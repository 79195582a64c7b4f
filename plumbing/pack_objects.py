"""`reel pack-objects`: write named objects (or everything reachable from refs) as one pack."""

from __future__ import annotations

import sys

import click

from reelstore import revisions
from reelstore.backend.disk_store import on_disk
from reelstore.backend.packs.pack_item import PackItem
from reelstore.backend.packs.pack_write import write_pack_stream
from reelstore.backend.repo import Repo
from reelstore.cli.complete import REVISIONS
from reelstore.cli.context import Context, pass_ctx
from reelstore.errors import BadInput, NotFound, StorageError
from reelstore.maintenance.reach import ref_roots, walk
from reelstore.objects import Hash


def _selected(repo: Repo, all_refs: bool, revs: bool, names: tuple[str, ...]) -> dict[Hash, str]:
    """id -> name hint, from stdin ids or from a reachability walk."""
    if all_refs or revs:
        roots = ref_roots(repo.refs, None) if all_refs else []
        roots += [(n, revisions.resolve(repo, n)) for n in names]
        w = walk(repo.objects, roots)
        if w.damaged:
            h, msg = next(iter(w.damaged.items()))
            raise StorageError(f"cannot pack: {msg}", id=h)
        if w.missing:
            h, via = next(iter(w.missing.items()))
            raise NotFound(f"cannot pack: object {h.hex()} (referenced by {via}) is missing", id=h)
        return {h: w.hints.get(h, "") for h in w.reachable}
    if names:
        raise click.UsageError("REF arguments need --revs; without it, ids come on stdin")
    out: dict[Hash, str] = {}
    for line in sys.stdin:
        text, _, hint = line.strip().partition(" ")
        if text:
            out[repo.objects.resolve(text)] = hint.strip()
    return out


@click.command("pack-objects")
@click.option("--stdout", "to_stdout", is_flag=True, help="Write the pack to standard output; no index.")
@click.option("--all", "all_refs", is_flag=True, help="Everything reachable from every ref.")
@click.option("--revs", is_flag=True, help="Everything reachable from the REF arguments.")
@click.argument("refs", nargs=-1, shell_complete=REVISIONS)
@pass_ctx
def pack_objects(ctx: Context, to_stdout: bool, all_refs: bool, revs: bool, refs: tuple[str, ...]) -> None:
    """Pack the objects whose ids come on stdin (one per line, optionally `ID NAME`), or with --all/--revs
    everything reachable. Writes pack-<checksum>.pack and .idx into objects/pack and prints the name."""
    repo = ctx.repo
    chosen = _selected(repo, all_refs, revs, refs)
    if not chosen:
        raise BadInput("no objects to pack")
    store = repo.objects
    items = [PackItem(h, store.get_raw(h), int(store.mtime(h)), hint) for h, hint in sorted(chosen.items())]
    if to_stdout:
        out = sys.stdout.buffer
        write_pack_stream(out.write, items)
        out.flush()
        return
    result = on_disk(store, "pack-objects without --stdout").add_pack(items)
    ctx.emit({"pack": result.name, "count": result.count, "size": result.size, "methods": result.methods}, result.name)


COMMANDS = [pack_objects]
