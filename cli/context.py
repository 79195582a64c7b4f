"""What every command shares: the store it acts on, `--json`, and one way to print results and errors.

`json` is imported where a JSON document is written, so a command's plain-text start-up skips it."""

from __future__ import annotations

import io
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import click

from reelstore.errors import ReelError

if TYPE_CHECKING:  # imported when a command first needs the store: --help and --version never do
    from reelstore.storage.repo import Repo


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
            from reelstore.storage.repo import Repo

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
            import json

            click.echo(json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False))
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
        import json

        click.echo(json.dumps({"error": err.to_json()}, sort_keys=True), err=True)
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
