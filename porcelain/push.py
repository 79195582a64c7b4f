"""`reel push`: send trunks and views to a git remote, each ref moved by compare-and-swap."""

from __future__ import annotations

import click

from reelstore.cli.context import Context, pass_ctx
from reelstore.cli.progress import end_progress, tty_progress


@click.command("push")
@click.argument("remote", required=False, default="origin")
@click.argument("refs", nargs=-1)
@pass_ctx
def push(ctx: Context, remote: str, refs: tuple[str, ...]) -> None:
    """Push REFS (default: every trunk and view) to REMOTE (default: origin).

    A remote ref moves only if it still holds what this store last saw there; otherwise nothing is
    pushed and the command exits 5 (E015). Refs the remote has moved past are skipped.
    """
    from reelstore import sync  # on use: it loads dulwich, which most commands never need

    progress = tty_progress()
    res = sync.push(ctx.repo, remote, list(refs) or None, progress.line if progress else None)
    end_progress(progress)

    def text() -> str:
        lines = [f"{r.status:>12}  {r.ref}  {r.new.hex()[:12]}" for r in res.refs]
        head = f"To {res.url}" + (f" (sync commit {res.commit[:12]}, {res.objects} objects)" if res.commit else "")
        return "\n".join([head, *lines])

    ctx.emit(res.to_json(), text)


COMMANDS = [push]
