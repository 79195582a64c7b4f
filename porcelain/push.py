"""`reel push`: send trunks and views to a git remote, each ref moved by compare-and-swap."""

from __future__ import annotations

import click

from reelstore.cli.complete import REMOTES, REVISIONS
from reelstore.cli.context import Context, pass_ctx
from reelstore.cli.progress import progress_for, progress_options
from reelstore.wording import plural


@click.command("push")
@click.argument("remote", required=False, default="origin", shell_complete=REMOTES)
@click.argument("refs", nargs=-1, shell_complete=REVISIONS)
@click.option(
    "--delete",
    "delete",
    is_flag=True,
    help="Delete REFS on the remote instead (each by compare-and-swap against what was last seen).",
)
@progress_options
@pass_ctx
def push(ctx: Context, remote: str, refs: tuple[str, ...], delete: bool) -> None:
    """Push REFS (default: every trunk and view) to REMOTE (default: origin).

    A remote ref moves only if it still holds what this store last saw there; otherwise nothing is
    pushed and the command exits 5 (E015). Refs the remote has moved past are skipped. Every view
    pushed is bound to REMOTE: from then on it is committed only with `commit --remote REMOTE`.
    """
    from reelstore import sync  # on use: it loads dulwich, which most commands never need

    if delete and not refs:
        raise click.UsageError("--delete needs at least one REF")
    with progress_for(ctx) as progress:
        report = progress.text if progress else None
        if delete:
            res = sync.delete(ctx.repo, remote, list(refs), report)
        else:
            res = sync.push(ctx.repo, remote, list(refs) or None, report)

    def text() -> str:
        lines = [f"{r.status:>12}  {r.ref}  {r.new.hex()[:12] if r.new else ''}".rstrip() for r in res.refs]
        head = f"To {res.url}" + (
            f" (sync commit {res.commit[:12]}, {plural(res.objects, 'object')})" if res.commit else ""
        )
        return "\n".join([*(f"note: {n}" for n in res.notes), head, *lines])

    ctx.emit(res.to_json(), text)


COMMANDS = [push]
