"""`reel init`: create a store."""

from __future__ import annotations

from pathlib import Path

import click

from reelstore.backend.postgres import check_url
from reelstore.backend.repo import DEFAULT_TRUNK, Repo
from reelstore.cli.context import Context, pass_ctx


@click.command("init")
@click.option("--trunk", default=DEFAULT_TRUNK, show_default=True, help="Name of the first trunk.")
@click.option(
    "--backend",
    metavar="URL",
    default=None,
    help="Keep objects, refs and the operation log in this Postgres database (postgresql://USER@HOST/DB, "
    "no password: use PGPASSWORD or ~/.pgpass); a database that already holds the trunk is joined.",
)
@click.argument("directory", required=False, type=click.Path(file_okay=False))
@pass_ctx
def init(ctx: Context, trunk: str, backend: str | None, directory: str | None) -> None:
    """Create DIRECTORY/.reel (default: here) with config, the trunk and sample hooks."""
    base = Path(ctx.directory or ".") / (directory or ".")
    if backend is not None:
        check_url(backend, "--backend")  # before anything is created
    base.mkdir(parents=True, exist_ok=True)
    repo = Repo.init(base, trunk, backend)
    text = (
        f"Initialized reel store in {repo.path} on {backend}"
        if backend
        else (f"Initialized empty reel store in {repo.path}")
    )
    ctx.emit({"path": str(repo.path), "trunk": trunk, "backend": backend}, text)


COMMANDS = [init]
