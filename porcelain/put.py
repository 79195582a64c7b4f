"""`reel put`: write a name in a view (Class A: undone by abort)."""

from __future__ import annotations

import sys

import click

from reelstore.cli.context import Context, pass_ctx
from reelstore.kernel import verbs as kernel


@click.command("put")
@click.argument("view")
@click.argument("name")
@click.argument("file", required=False, default="-")
@pass_ctx
def put(ctx: Context, view: str, name: str, file: str) -> None:
    """Store FILE (or stdin, '-') under NAME in VIEW; prints the content id. Any size is streamed:
    content over 4 MiB is stored as content-defined chunks."""
    if file == "-":
        h, size = kernel.put_stream(ctx.repo, view, name, sys.stdin.buffer)
    else:
        with open(file, "rb") as f:
            h, size = kernel.put_stream(ctx.repo, view, name, f)
    ctx.emit({"view": view, "name": name, "id": h.hex(), "size": size}, h.hex())


COMMANDS = [put]
