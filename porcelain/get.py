"""`reel get`: read a name from a view."""

from __future__ import annotations

import click

from reelstore.api import Store
from reelstore.cli.context import Context, pass_ctx, write_bytes


@click.command("get")
@click.argument("view")
@click.argument("name")
@pass_ctx
def get(ctx: Context, view: str, name: str) -> None:
    """Print the bytes stored under NAME in VIEW."""
    data = Store(ctx.repo).handle(view).get(name)
    if ctx.json:
        try:
            ctx.emit({"view": view, "name": name, "data": data.decode("utf-8")})
        except UnicodeDecodeError:
            ctx.emit({"view": view, "name": name, "data": {"$bytes": data.hex()}})
    else:
        write_bytes(data)


COMMANDS = [get]
