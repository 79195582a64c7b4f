"""`reel reflog`: a ref's history of values, newest first, numbered as `REF@{n}`."""

from __future__ import annotations

import click

from reelstore.cli.complete import REVISIONS
from reelstore.cli.context import Context, pass_ctx
from reelstore.cli.refargs import full_ref
from reelstore.errors import NotFound
from reelstore.kernel.history import MAX_LIMIT


@click.command("reflog")
@click.option("-n", "--max-count", "limit", type=click.IntRange(0, MAX_LIMIT), help="Show at most this many entries.")
@click.argument("args", nargs=-1, shell_complete=REVISIONS)
@pass_ctx
def reflog(ctx: Context, limit: int | None, args: tuple[str, ...]) -> None:
    """Show the reflog of REF (default: the trunk's head). `reel reflog show REF` also works, as in git."""
    if args[:1] == ("show",):
        args = args[1:]
    if len(args) > 1:
        raise click.UsageError("give at most one REF")
    repo = ctx.repo
    given = args[0] if args else repo.trunk
    name = full_ref(repo, given) if args else f"refs/heads/{repo.trunk}"
    entries = repo.refs.reflog(name)
    if not entries:
        raise NotFound(f"no reflog for {name}", ref=name)
    newest = list(reversed(entries))[:limit]
    docs = [
        {
            "index": i,
            "old": e.old.hex() if e.old else None,
            "new": e.new.hex() if e.new else None,
            "time_ms": e.time_ms,
            "principal": e.principal,
            "message": e.message,
        }
        for i, e in enumerate(newest)
    ]
    ctx.emit(
        {"ref": name, "entries": docs},
        "\n".join(f"{e.new.short if e.new else '0' * 12} {given}@{{{i}}}: {e.message}" for i, e in enumerate(newest)),
    )


COMMANDS = [reflog]
