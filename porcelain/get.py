"""`reel get`: read a name from a view, or from a trunk's head."""

from __future__ import annotations

import io
import sys
from collections.abc import Iterator

import click

from reelstore.backend import content
from reelstore.backend.fileio import write_all
from reelstore.cli.complete import SOURCES
from reelstore.cli.context import Context, pass_ctx
from reelstore.cli.refargs import trunk_namespace
from reelstore.errors import NotFound
from reelstore.kernel import verbs as kernel
from reelstore.namespace.tree import Namespace


def _pieces(ctx: Context, view: str, name: str) -> Iterator[bytes]:
    """NAME's bytes piece by piece: from trunk VIEW's head record when VIEW is a trunk, else the view."""
    root = trunk_namespace(ctx.repo, view)
    if root is None:
        return kernel.read(ctx.repo, view, name)
    found = Namespace(ctx.repo.objects).get(root, name)
    if found is None:
        raise NotFound(f"{name!r} is not in trunk {view}", name=name)
    return content.read(ctx.repo.objects, found)


@click.command("get")
@click.argument("view", shell_complete=SOURCES)
@click.argument("name")
@pass_ctx
def get(ctx: Context, view: str, name: str) -> None:
    """Print the bytes stored under NAME in VIEW (or in a trunk's head: `main`, `refs/heads/main`),
    streamed piece by piece whatever their size."""
    pieces = _pieces(ctx, view, name)
    if ctx.json:
        data = b"".join(pieces)
        try:
            ctx.emit({"view": view, "name": name, "data": data.decode("utf-8")})
        except UnicodeDecodeError:
            ctx.emit({"view": view, "name": name, "data": {"$bytes": data.hex()}})
        return
    # Straight to the descriptor: a buffered stream can drop the error of a write the machine refuses
    # after a partial one (EFBIG past the file size limit), and the output would end short with exit 0.
    sys.stdout.flush()
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, io.UnsupportedOperation):  # an in-memory stdout (a test runner's)
        fd = None
    for piece in pieces:
        if fd is None:
            sys.stdout.buffer.write(piece)
        else:
            write_all(fd, piece, fsync=False)
    if fd is None:
        sys.stdout.buffer.flush()


COMMANDS = [get]
