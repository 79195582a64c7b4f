"""`reel fetch`: bring a remote's trunks and views into `refs/remotes/REMOTE/…`, and catch up."""

from __future__ import annotations

import click

from reelstore.cli.complete import REMOTES
from reelstore.cli.context import Context, pass_ctx
from reelstore.cli.progress import progress_for, progress_options
from reelstore.wording import plural

_SAID = {
    "fast-forward": "fast-forwarded to",
    "up-to-date": "up to date at",
    "ahead": "is ahead of the remote, not moved; at",
    "diverged": "has diverged from the remote, not moved; it has",
}


@click.command("fetch")
@click.argument("remote", required=False, default="origin", shell_complete=REMOTES)
@click.option(
    "--prune",
    is_flag=True,
    help="Delete remote-tracking refs the remote no longer has, and abort local views bound to it "
    "whose copy there is gone.",
)
@progress_options
@pass_ctx
def fetch(ctx: Context, remote: str, prune: bool) -> None:
    """Fetch REMOTE (default: origin), then fast-forward local trunks that have not diverged and retire
    local views whose commit has landed. Every object is re-hashed and decoded before it is stored;
    one bad object refuses the whole fetch (E007, exit 3) and stores nothing."""
    from reelstore import sync  # on use: it loads dulwich, which most commands never need

    with progress_for(ctx) as progress:
        res = sync.fetch(ctx.repo, remote, progress.text if progress else None, prune=prune)

    def text() -> str:
        lines = [f"From {res.url} ({plural(res.objects, 'new object')})"]
        lines += [f"  {name}  {h.hex()[:12]}" for name, h in sorted(res.refs.items()) if name in res.updated]
        for t in res.trunks:
            if t.status != "up-to-date" or res.updated:
                where = t.new if t.status in ("fast-forward", "up-to-date") else t.old
                lines.append(f"trunk {t.trunk} {_SAID[t.status]} {where.hex()[:12]}")
        lines += [f"view {name} was committed as {h.hex()}" for name, h in sorted(res.retired.items())]
        lines += [
            f"{ref} is gone from {remote}" for ref in res.gone if ref.removeprefix("refs/views/") not in res.retired
        ]
        lines += [f"pruned {ref}" for ref in res.pruned]
        lines += [f"aborted view {name} (its copy on {remote} is gone)" for name in res.aborted]
        lines += [f"view {name} is live here, bound to {remote}" for name in res.materialized]
        lines += [f"note: {n}" for n in res.notes]
        return "\n".join(lines)

    ctx.emit(res.to_json(), text)


COMMANDS = [fetch]
