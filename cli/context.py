"""What every command shares: the store it acts on, `--json`, and one way to print results and errors."""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import click

from reelstore.errors import ReelError

if TYPE_CHECKING:  # imported when a command first needs the store: --help and --version never do
    from reelstore.backend.repo import Repo


def json_text(value: Any, *, indent: int | None = 2) -> str:
    """The command line's one JSON writer: keys sorted (stable output to diff and test), non-ASCII
    written as it is; indented for a document, one line (`indent=None`) for an error or a field."""
    return json.dumps(value, indent=indent, sort_keys=True, ensure_ascii=False)


def _turn_on_json(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value:
        ctx.ensure_object(Context).json = True


def with_json(command: click.Command) -> click.Command:
    """Give `command` (and each of its subcommands) a `--json` of its own, the same switch as the
    global one, so `reel CMD ... --json` works as git users type it. Done once per command object."""
    if not any(isinstance(p, click.Option) and "--json" in p.opts for p in command.params):
        command.params.append(
            click.Option(
                ["--json", "json_after"],
                is_flag=True,
                expose_value=False,
                is_eager=True,
                callback=_turn_on_json,
                help="Print one JSON document on stdout.",
            )
        )
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            with_json(sub)
    return command


class Context:
    def __init__(self, directory: str | None, as_json: bool) -> None:
        self.directory = directory
        self.json = as_json
        self.quiet = False  # -q: no progress, no summary on stderr
        self.progress: bool | None = None  # --progress / --no-progress; None: only on a terminal
        self.color: str | None = None  # --color=WHEN (auto, always, never) / --no-color; None: the config's
        self.no_pager = False  # --no-pager
        self._repo: Repo | None = None

    @property
    def repo(self) -> Repo:
        if self._repo is None:
            from reelstore.backend.repo import Repo

            self._repo = Repo.discover(Path(self.directory) if self.directory else None)
        return self._repo

    @property
    def opened(self) -> Repo | None:
        """The store, if this command has opened one (without discovering it now)."""
        return self._repo

    def emit(self, doc: Any, text: str | Callable[[], str] | None = None, *, page: bool = False) -> None:
        """Print `doc` as one JSON document under --json, else `text` (or nothing), coloured as
        configured and, with `page` (long output), through the pager on a terminal."""
        if self.json:
            click.echo(json_text(doc))
        elif text is not None:
            out = text() if callable(text) else text
            if not out:
                return
            if not page and "\x1b" not in out:  # no styling to keep or strip, no pager: the same bytes
                click.echo(out)
                return
            from reelstore.cli import terminal  # colour and pager: only styled or paged text loads them

            terminal.echo(self, out, page=page)


pass_ctx = click.make_pass_decorator(Context)


def report(err: ReelError, as_json: bool) -> None:
    """Print an error to stderr in the house format."""
    if as_json:
        click.echo(json_text({"error": err.to_json()}, indent=None), err=True)
    else:
        click.echo(f"error: {err.code}: {err.message}", err=True)


def every_byte(out: BinaryIO) -> Callable[[bytes | bytearray | memoryview], object]:
    """`out.write` that writes every byte: an unbuffered stdout (PYTHONUNBUFFERED) is a raw file, whose
    write may write fewer (each round writes at least one byte, or the stream is refused)."""
    if not isinstance(out, io.RawIOBase):
        return out.write

    def write(data: bytes | bytearray | memoryview) -> None:
        view = memoryview(data)
        while view:
            done = out.write(view)
            if not done:
                raise OSError("standard output takes no more bytes")
            view = view[done:]

    return write


def write_bytes(data: bytes) -> None:
    """Write `data` to standard output whole, as an object's content must be."""
    out = sys.stdout.buffer
    every_byte(out)(data)
    out.flush()
