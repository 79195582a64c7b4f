"""The verb log: each view's fork, commit and abort, kept as marks in the operation log
(backend/op_log), so a store has one log of what its verbs did.

A view's ref is deleted when it ends, so the ref alone cannot tell "never existed" (E001) from
"already committed or aborted" (E008); this log answers that. Each open store reads it incrementally:
a lookup reads only the lines appended since the last one (by any process).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from reelstore.backend.op_log import TERMINAL_VERBS, OpLine, OpLog
from reelstore.objects import Hash


@dataclass(frozen=True, slots=True)
class VerbEntry:
    """One fork, commit or abort of a view."""

    time_ms: int
    verb: str
    name: str
    view: str
    detail: str


class VerbLog:
    """A store's verb marks, read from and written to its operation log."""

    def __init__(self, ops: OpLog) -> None:
        self.ops = ops

    def append(self, verb: str, name: str, view_id: Hash, detail: str = "", time_ms: int | None = None) -> None:
        """Log a fork, commit or abort: a commit's or an abort's durably (when the store fsyncs), a fork's
        without an fsync of its own.

        A commit or abort mark is what tells E008 ("was committed") from E001 once the view's ref is gone,
        so it is made durable. A fork mark is written after the view's ref is durable and only ever masks
        an older commit or abort of the same name, which matters once that ref is gone again, and a ref
        goes only through a commit or abort, whose own mark is durable. A fork mark lost in a power cut
        therefore changes no answer (tested by cutting it off, and by a SIGKILL before it is written)."""
        self.ops.mark(verb, name, view_id, detail, time_ms=time_ms)

    def entries(self) -> Iterator[VerbEntry]:
        """Every entry, oldest first."""
        return (_entry(line) for line in self.ops.lines() if line.view)

    def last(self, name: str) -> VerbEntry | None:
        """The newest entry of a view called `name`."""
        line = self.ops.last_mark(name)
        return None if line is None else _entry(line)

    def last_end(self, name: str) -> VerbEntry | None:
        """The newest commit or abort of a view called `name`, if that is the newest thing it did."""
        last = self.last(name)
        return last if last is not None and last.verb in TERMINAL_VERBS else None


def _entry(line: OpLine) -> VerbEntry:
    return VerbEntry(line.time_ms, line.verb, line.view, line.view_id, line.detail)
