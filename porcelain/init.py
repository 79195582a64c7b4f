"""`reel init`: create a store."""

from __future__ import annotations

from pathlib import Path

import click

from reelstore.cli.context import Context, pass_ctx
from reelstore.storage.repo import DEFAULT_TRUNK, Repo


@click.command("init")
@click.option("--trunk", default=DEFAULT_TRUNK, show_default=True, help="Name of the first trunk.")
@click.argument("directory", required=False, type=click.Path(file_okay=False))
@pass_ctx
def init(ctx: Context, trunk: str, directory: str | None) -> None:
    """Create DIRECTORY/.reel (default: here) with config, the trunk and sample hooks."""
    base = Path(ctx.directory or ".") / (directory or ".")
    base.mkdir(parents=True, exist_ok=True)
    repo = Repo.init(base, trunk)
    ctx.emit({"path": str(repo.path), "trunk": trunk}, f"Initialized empty reel store in {repo.path}")


COMMANDS = [init]
