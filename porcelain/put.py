"""`reel put`: write a name in a view (Class A: undone by abort), or import files in one transaction."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import BinaryIO

import click

from reelstore.cli.complete import VIEWS
from reelstore.cli.context import Context, pass_ctx
from reelstore.errors import BadInput, input_error
from reelstore.kernel import verbs as kernel
from reelstore.kernel.tree_import import import_paths
from reelstore.wording import plural


def _open(file: str) -> BinaryIO:
    """The user's FILE: a missing one is E001, a directory or an unreadable one E014 (never E007)."""
    try:
        return open(file, "rb")
    except OSError as exc:
        raise input_error(exc, file) from None


@click.command("put")
@click.argument("view", shell_complete=VIEWS)
@click.argument("args", nargs=-1)
@click.option("--stdin-paths", is_flag=True, help="Read the paths of files to import from stdin, one a line.")
@pass_ctx
def put(ctx: Context, view: str, args: tuple[str, ...], stdin_paths: bool) -> None:
    """Store FILE (or stdin, '-') under NAME in VIEW; prints the content id.

    Any size is streamed (over 4 MiB as content-defined chunks). `reel put VIEW DIR…` or
    --stdin-paths imports the files as one transaction."""
    cwd = Path.cwd()
    if stdin_paths or (args and Path(args[0]).is_dir() and not Path(args[0]).is_symlink()):
        paths = list(args)
        if stdin_paths:
            paths += [line for line in sys.stdin.read().split("\n") if line]
        if not paths:
            raise BadInput("nothing to import: name a directory or give paths on stdin")
        with kernel.transaction(ctx.repo, view) as tx:
            report = import_paths(tx, paths, cwd)
        for path, reason in report.skipped:
            click.echo(f"skipped {path}: {reason}", err=True)
        doc = {"view": view, **report.to_json()}
        ctx.emit(doc, f"put {plural(report.count, 'name')} ({plural(report.bytes, 'byte')}) into view {view}")
        return
    if not args or len(args) > 2:
        raise BadInput("usage: reel put VIEW NAME [FILE|-], reel put VIEW DIR… or reel put VIEW --stdin-paths")
    name, file = args[0], args[1] if len(args) > 1 else "-"
    if file == "-":
        h, size = kernel.put_stream(ctx.repo, view, name, sys.stdin.buffer)
    else:
        with _open(file) as f:
            h, size = kernel.put_stream(ctx.repo, view, name, f)
    ctx.emit({"view": view, "name": name, "id": h.hex(), "size": size}, h.hex())


COMMANDS = [put]
