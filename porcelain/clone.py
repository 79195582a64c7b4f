"""`reel clone`: a new store from a git remote, recorded as `origin`, its trunks and views checked out."""

from __future__ import annotations

from pathlib import Path

import click

from reelstore.cli.context import Context, pass_ctx
from reelstore.cli.progress import progress_for, progress_options
from reelstore.wording import plural


def _default_dir(url: str) -> str:
    name = url.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1]
    return name.removesuffix(".git") or "reel"


@click.command("clone")
@click.argument("url")
@click.argument("directory", required=False)
@progress_options
@pass_ctx
def clone(ctx: Context, url: str, directory: str | None) -> None:
    """Clone URL into DIRECTORY (default: the last part of the URL, without .git)."""
    from reelstore import sync  # on use: it loads dulwich, which most commands never need

    base = Path(ctx.directory or ".") / (directory or _default_dir(url))
    with progress_for(ctx) as progress:
        repo, res = sync.clone(url, base, progress.text if progress else None)
    local = sorted(name for name, _ in repo.refs.list("refs/") if name.startswith(("refs/heads/", "refs/views/")))
    ctx.emit(
        {"path": str(repo.path), "trunk": repo.trunk, **res.to_json(), "checked_out": local},
        f"Cloned {url} into {repo.path} ({plural(res.objects, 'object')}; {', '.join(local)})",
    )


COMMANDS = [clone]
