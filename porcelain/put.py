"""`reel put`: write a name in a view (Class A: undone by abort)."""

from __future__ import annotations

import sys
from typing import BinaryIO

import click

from reelstore.cli.context import Context, pass_ctx
from reelstore.errors import input_error
from reelstore.kernel import verbs as kernel


def _open(file: str) -> BinaryIO:
    """The user's FILE: a missing one is E001, a directory or an unreadable one E014 (never E007)."""
    try:
        return open(file, "rb")
    except OSError as exc:
        raise input_error(exc, file) from None


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
        with _open(file) as f:
            h, size = kernel.put_stream(ctx.repo, view, name, f)
    ctx.emit({"view": view, "name": name, "id": h.hex(), "size": size}, h.hex())


COMMANDS = [put]
