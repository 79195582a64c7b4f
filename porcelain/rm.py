"""`reel rm`: remove a name from a view (Class A)."""

from __future__ import annotations

import click

from reelstore.api import Store
from reelstore.cli.complete import VIEWS
from reelstore.cli.context import Context, pass_ctx


@click.command("rm")
@click.argument("view", shell_complete=VIEWS)
@click.argument("name")
@pass_ctx
def rm(ctx: Context, view: str, name: str) -> None:
    """Remove NAME from VIEW."""
    Store(ctx.repo).handle(view).rm(name)
    ctx.emit({"view": view, "name": name, "removed": True}, f"removed {name}")


COMMANDS = [rm]
