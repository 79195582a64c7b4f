"""Progress for long commands, in one place: on stderr, and only when stderr is a terminal (never in
pipes, logs or tests). The library reports either free text (a remote's messages) or a counter per
stage (gc, repack, fsck); both draw on the same line, which `end` clears."""

from __future__ import annotations

import sys


class TtyProgress:
    """One progress line on a terminal's stderr. Pass `line` or `count` to the library as its sink."""

    def __init__(self) -> None:
        self._drawn = False

    def line(self, text: str) -> None:
        """Text ending in `\\r` (a remote's running counter) is redrawn in place; anything else becomes a line."""
        if not text.endswith(("\r", "\n")):
            text += "\n"
        self._write(text)
        self._drawn = text.endswith("\r")

    def count(self, stage: str, done: int, total: int | None = None) -> None:
        """`STAGE: DONE/TOTAL` (or `STAGE: DONE` when the total is unknown), redrawn in place."""
        tail = f"{done}/{total}" if total else str(done)
        self._write(f"\r{stage}: {tail}\x1b[K")
        self._drawn = True

    def end(self) -> None:
        """Clear a line left in place, so the command's own output starts on a clean line."""
        if self._drawn:
            self._write("\r\x1b[K")
            self._drawn = False

    @staticmethod
    def _write(text: str) -> None:
        sys.stderr.write(text)
        sys.stderr.flush()


def tty_progress() -> TtyProgress | None:
    """A progress line when a person is watching stderr, else None (the library then reports nothing)."""
    return TtyProgress() if sys.stderr.isatty() else None


def end_progress(progress: TtyProgress | None) -> None:
    if progress is not None:
        progress.end()
