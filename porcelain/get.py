"""`reel get`: read a name from a view."""

from __future__ import annotations

import sys

import click

from reelstore.cli.context import Context, pass_ctx
from reelstore.kernel import verbs as kernel


@click.command("get")
@click.argument("view")
@click.argument("name")
@pass_ctx
def get(ctx: Context, view: str, name: str) -> None:
    """Print the bytes stored under NAME in VIEW, streamed piece by piece whatever their size."""
    pieces = kernel.read(ctx.repo, view, name)
    if ctx.json:
        data = b"".join(pieces)
        try:
            ctx.emit({"view": view, "name": name, "data": data.decode("utf-8")})
        except UnicodeDecodeError:
            ctx.emit({"view": view, "name": name, "data": {"$bytes": data.hex()}})
        return
    out = sys.stdout.buffer
    for piece in pieces:
        out.write(piece)
    out.flush()


COMMANDS = [get]
