"""`reel put`: write a name in a view (Class A: undone by abort)."""

from __future__ import annotations

import sys

import click

from reelstore.api import Store
from reelstore.cli.context import Context, pass_ctx


@click.command("put")
@click.argument("view")
@click.argument("name")
@click.argument("file", required=False, default="-")
@pass_ctx
def put(ctx: Context, view: str, name: str, file: str) -> None:
    """Store FILE (or stdin, '-') under NAME in VIEW; prints the blob id."""
    data = sys.stdin.buffer.read() if file == "-" else click.open_file(file, "rb").read()
    blob = Store(ctx.repo).handle(view).put(name, data)
    ctx.emit({"view": view, "name": name, "id": blob.hex(), "size": len(data)}, blob.hex())


COMMANDS = [put]
