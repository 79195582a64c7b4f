"""Progress for long commands, in one place, as git shows it: on stderr, by default only when stderr is a
terminal; `--progress` forces it, `-q`/`--no-progress` silence it. The library reports either text in
pieces (a remote's sideband, which arrives cut anywhere, and its own lines) or a counter per stage (gc,
repack, fsck); both are drawn here. A counter is redrawn in place and, when its stage ends, left as one
`STAGE: 100% (N/N), done.` line. On a terminal whose TERM is dumb (or when forced into a pipe) no
escape code is written: a redraw is `\\r` and the line padded with spaces, as git does."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TextIO, TypeVar

import click

from reelstore.cli.context import Context

REDRAW_S = 0.1
"""The least time between two in-place redraws: a counter ticking every object would flood the terminal."""

F = TypeVar("F", bound=Callable[..., Any])


def dumb_terminal() -> bool:
    """TERM unset or `dumb`: the terminal understands no escape codes (git's is_terminal_dumb)."""
    return os.environ.get("TERM", "dumb") in ("", "dumb")


class Progress:
    """One progress display on `stream`. Give `text` or `count` to the library as its sink; `end` when done."""

    def __init__(self, stream: TextIO, *, escapes: bool, width: int | None = None) -> None:
        self._stream = stream
        self._escapes = escapes
        self._width = width
        self._partial = ""  # text received after the last \r or \n: drawn once its line ends
        self._shown = 0  # length of what stands on the current line, drawn in place, 0 if nothing
        self._current = ""  # the latest in-place line, drawn or skipped by the redraw limit
        self._stage: tuple[str, int, int | None] | None = None
        self._last_draw = 0.0

    def text(self, chunk: str) -> None:
        """Text in any pieces: a part ending in `\\r` is redrawn in place, one ending in `\\n` stays as a
        line. A line cut mid-word is held until the rest of it arrives."""
        self._finish_stage()
        data = (self._partial + chunk).replace("\r\n", "\n")
        self._partial = ""
        start = 0
        for i, ch in enumerate(data):
            if ch in "\r\n":
                self._draw(data[start:i], final=ch == "\n", force=False)
                start = i + 1
        self._partial = data[start:]

    def count(self, stage: str, done: int, total: int | None = None) -> None:
        """A stage's counter, redrawn in place; a new stage leaves the previous one as a `done.` line."""
        if self._stage is not None and self._stage[0] != stage:
            self._finish_stage()
        self._stage = (stage, done, total)
        self._draw(_counter(stage, done, total), final=False, force=False)

    def end(self) -> None:
        """Finish what is drawn (the last stage as `done.`, text still waiting for its line end), so the
        command's own output starts on a clean line."""
        self._finish_stage()
        if self._partial:
            self._draw(self._partial, final=True, force=True)
            self._partial = ""
        elif self._shown:
            self._write("\n")
            self._shown = 0

    def _finish_stage(self) -> None:
        if self._stage is None:
            return
        stage, done, total = self._stage
        self._stage = None
        self._draw(_counter(stage, done, total) + ", done.", final=True, force=True)

    def _draw(self, line: str, *, final: bool, force: bool) -> None:
        if not final:
            if not line:
                return  # a bare `\r`: the next part redraws anyway
            self._current = line
            if not force and self._shown and time.monotonic() - self._last_draw < REDRAW_S:
                return
        elif not line:
            if not self._shown:
                return  # an empty line from a remote: nothing to keep
            line = self._current  # `\r` then `\n`: the counter last sent stays as the line
        if not final and self._width and len(line) >= self._width:
            line = line[: self._width - 1]
        out = line
        if self._shown:
            pad = "" if self._escapes else " " * max(0, self._shown - len(line))
            out = f"\r{line}\x1b[K" if self._escapes else f"\r{line}{pad}"
        if final:
            self._write(out + "\n")
            self._shown, self._current = 0, ""
        else:
            self._write(out)
            self._shown = len(line)
        self._last_draw = time.monotonic()

    def _write(self, text: str) -> None:
        self._stream.write(text)
        self._stream.flush()


def _counter(stage: str, done: int, total: int | None) -> str:
    """git's counter: `STAGE:  45% (450/1000)`, or `STAGE: 450` when the total is unknown."""
    if total:
        return f"{stage}: {min(100, done * 100 // total):3d}% ({done}/{total})"
    return f"{stage}: {done}"


def wanted(ctx: Context, stream: TextIO | None = None) -> bool:
    """Whether this command shows progress: `--progress` yes (even with -q, as git), `--no-progress` and
    `-q` no, else only when a person watches stderr."""
    if ctx.progress is not None:
        return ctx.progress
    return not ctx.quiet and (stream or sys.stderr).isatty()


def _columns(stream: TextIO) -> int | None:
    """The width of the terminal progress is drawn on (stderr's, which may differ from stdout's), if known."""
    try:
        columns = os.get_terminal_size(stream.fileno()).columns
    except (OSError, ValueError):
        return None
    return columns or None


@contextmanager
def progress_for(ctx: Context) -> Iterator[Progress | None]:
    """The command's progress display (None when it shows none), ended on the way out, errors included."""
    stream = sys.stderr
    if not wanted(ctx, stream):
        yield None
        return
    tty = stream.isatty()
    shown = Progress(stream, escapes=tty and not dumb_terminal(), width=_columns(stream) if tty else None)
    try:
        yield shown
    finally:
        shown.end()


def _set_progress(ctx: click.Context, _param: click.Parameter, value: bool | None) -> None:
    if value is not None:
        ctx.ensure_object(Context).progress = value


def _set_quiet(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value:
        ctx.ensure_object(Context).quiet = True


def progress_options(command: F) -> F:
    """`-q`/`--quiet` and `--progress`/`--no-progress`, as git's long commands take them."""
    command = click.option(
        "--progress/--no-progress",
        "progress",
        default=None,
        expose_value=False,
        callback=_set_progress,
        help="Show progress on stderr even when it is not a terminal (or never); --progress wins over -q, as in git.",
    )(command)
    return click.option(
        "-q",
        "--quiet",
        is_flag=True,
        default=False,
        expose_value=False,
        callback=_set_quiet,
        help="Show no progress on stderr (fsck: nor its summary line).",
    )(command)
