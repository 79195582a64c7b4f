"""`reel hash-object`: compute an object's id from content, and optionally store it."""

from __future__ import annotations

import sys

import click

from reelstore.cli.context import Context, pass_ctx
from reelstore.codec import frame
from reelstore.objects import KINDS, Blob, Object, decode


def object_from_content(kind: str, data: bytes) -> Object:
    """A blob from raw bytes; any other kind from its canonical body, as `cat-file --batch` prints it."""
    return Blob(data) if kind == "blob" else decode(frame(kind, data))


@click.command("hash-object")
@click.option("-t", "kind", type=click.Choice(sorted(KINDS)), default="blob", show_default=True,
              help="Object kind; for kinds other than blob the input is the canonical msgpack body.")
@click.option("-w", "write", is_flag=True, help="Store the object.")
@click.option("--stdin", "use_stdin", is_flag=True, help="Read the content from standard input.")
@click.option("--stdin-paths", is_flag=True, help="Read file paths, one per line, from standard input.")
@click.argument("files", nargs=-1, type=click.Path(exists=True, dir_okay=False))
@pass_ctx
def hash_object(ctx: Context, kind: str, write: bool, use_stdin: bool, stdin_paths: bool, files: tuple) -> None:
    """Print the id of each FILE's (or stdin's) content as an object of KIND; -w also stores it."""
    if use_stdin and stdin_paths:
        raise click.UsageError("--stdin and --stdin-paths both read standard input; give one")
    sources: list[bytes] = []
    if use_stdin:
        sources.append(sys.stdin.buffer.read())
    paths = list(files)
    if stdin_paths:
        paths += [line.rstrip("\n") for line in sys.stdin if line.strip()]
    for path in paths:
        with open(path, "rb") as f:
            sources.append(f.read())
    if not sources:
        raise click.UsageError("nothing to hash: give FILE arguments, --stdin or --stdin-paths")
    objects = [object_from_content(kind, data) for data in sources]
    if write:
        ctx.repo.objects.put_many(objects)
    ctx.emit([o.id.hex() for o in objects], "\n".join(o.id.hex() for o in objects))


COMMANDS = [hash_object]
