"""`reel hash-object`: compute an object's id from content, and optionally store it."""

from __future__ import annotations

import sys
from typing import BinaryIO

import click

from reelstore.backend import content
from reelstore.backend.object_store import ObjectStore
from reelstore.cli.context import Context, pass_ctx
from reelstore.codec import MAX_OBJECT_SIZE, frame
from reelstore.errors import BadInput, input_error
from reelstore.objects import KINDS, Blob, Object, decode


def object_from_content(kind: str, data: bytes) -> Object:
    """A blob from raw bytes; any other kind from its canonical body, as `cat-file --batch` prints it."""
    return Blob(data) if kind == "blob" else decode(frame(kind, data))


@click.command("hash-object")
@click.option(
    "-t",
    "kind",
    type=click.Choice(sorted(KINDS)),
    default="blob",
    show_default=True,
    help="Object kind; for kinds other than blob the input is the canonical msgpack body.",
)
@click.option("-w", "write", is_flag=True, help="Store the object.")
@click.option("--stdin", "use_stdin", is_flag=True, help="Read the content from standard input.")
@click.option("--stdin-paths", is_flag=True, help="Read file paths, one per line, from standard input.")
@click.argument("files", nargs=-1, type=click.Path())
@pass_ctx
def hash_object(
    ctx: Context, kind: str, write: bool, use_stdin: bool, stdin_paths: bool, files: tuple[str, ...]
) -> None:
    """Print the id of each FILE's (or stdin's) content as an object of KIND; -w also stores it."""
    if use_stdin and stdin_paths:
        raise click.UsageError("--stdin and --stdin-paths both read standard input; give one")
    paths = list(files)
    if stdin_paths:
        paths += [line.rstrip("\n") for line in sys.stdin if line.strip()]
    if not use_stdin and not paths:
        raise click.UsageError("nothing to hash: give FILE arguments, --stdin or --stdin-paths")
    store = ctx.repo.objects if write else None
    ids: list[str] = []
    if use_stdin:
        ids.append(_hash(store, kind, sys.stdin.buffer))
    for path in paths:
        try:
            source = open(path, "rb")
        except OSError as exc:
            raise input_error(exc, path) from None
        with source as f:
            ids.append(_hash(store, kind, f))
    ctx.emit(ids, "\n".join(ids))


def _hash(store: ObjectStore | None, kind: str, source: BinaryIO) -> str:
    """A blob's content is streamed (chunked above 4 MiB, as `put` stores it); other kinds are read
    whole, bounded by the object size limit."""
    if kind == "blob":
        return content.write(store, source)[0].hex()
    data = source.read(MAX_OBJECT_SIZE + 1)
    if len(data) > MAX_OBJECT_SIZE:
        raise BadInput(f"a {kind} body is at most {MAX_OBJECT_SIZE} bytes")
    obj = object_from_content(kind, data)
    if store is not None:
        store.put(obj)
    return obj.id.hex()


COMMANDS = [hash_object]
