"""`reel fetch`: bring a remote's trunks and views into `refs/remotes/REMOTE/…`."""

from __future__ import annotations

import click

from reelstore.cli.context import Context, pass_ctx
from reelstore.cli.progress import end_progress, tty_progress


@click.command("fetch")
@click.argument("remote", required=False, default="origin")
@pass_ctx
def fetch(ctx: Context, remote: str) -> None:
    """Fetch REMOTE (default: origin). Every object is re-hashed and decoded before it is stored;
    one bad object refuses the whole fetch (E007, exit 3) and stores nothing."""
    from reelstore import sync  # on use: it loads dulwich, which most commands never need

    progress = tty_progress()
    res = sync.fetch(ctx.repo, remote, progress.line if progress else None)
    end_progress(progress)

    def text() -> str:
        lines = [f"From {res.url} ({res.objects} new objects)"]
        lines += [f"  {name}  {h.hex()[:12]}" for name, h in sorted(res.refs.items()) if name in res.updated]
        return "\n".join(lines)

    ctx.emit(res.to_json(), text)


COMMANDS = [fetch]
