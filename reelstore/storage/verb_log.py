"""The verb log (`.reel/logs/VERBS`): one line `TIME VERB NAME VIEW DETAIL` per fork, commit and abort.

A view's ref is deleted when it ends, so the ref alone cannot tell "never existed" (E001) from "already
committed or aborted" (E008); this log answers that. It is an audit trail, not a gc root: it names
aborted views' objects without keeping them alive. Each open store reads it incrementally: a lookup
reads only the lines appended since the last one (by any process).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator

from reelstore.frozen import frozen
from reelstore.objects import Hash
from reelstore.storage.state_files import StateFiles

FILE = "logs/VERBS"
TERMINAL_VERBS = ("commit", "abort")


@frozen
class VerbEntry:
    """One line of the verb log (a frozen value class: half a NamedTuple's class-creation cost, which
    every fork paid at start-up)."""

    time_ms: int
    verb: str
    name: str
    view: str
    detail: str


class VerbLog:
    """A store's verb log, with the newest entry per view name kept up to date from the file's tail."""

    def __init__(self, files: StateFiles) -> None:
        self.files = files
        self._offset = 0
        self._last: dict[str, VerbEntry] = {}
        self._guard = threading.Lock()

    def append(self, verb: str, name: str, view_id: Hash, detail: str = "", time_ms: int | None = None) -> None:
        """Append one line: a commit's or an abort's durably (when the store fsyncs), a fork's without an
        fsync of its own.

        A commit or abort line is what tells E008 ("was committed") from E001 once the view's ref is gone,
        so it is made durable. A fork line is written after the view's ref is durable and only ever masks
        an older commit or abort of the same name, which matters once that ref is gone again, and a ref
        goes only through a commit or abort, whose own line is durable. A fork line lost in a power cut
        therefore changes no answer (tested by cutting it off, and by a SIGKILL before it is written)."""
        stamp = int(time.time() * 1000) if time_ms is None else time_ms
        line = f"{stamp} {verb} {name} {view_id.hex()} {detail}".rstrip() + "\n"
        self.files.append(FILE, line.encode("utf-8"), durable=verb in TERMINAL_VERBS)

    def entries(self) -> Iterator[VerbEntry]:
        """Every entry, oldest first."""
        data = self.files.read(FILE) or b""
        return _parse(data.decode("utf-8", "replace").splitlines())

    def last(self, name: str) -> VerbEntry | None:
        """The newest entry of a view called `name`."""
        with self._guard:
            self._catch_up()
            return self._last.get(name)

    def last_end(self, name: str) -> VerbEntry | None:
        """The newest commit or abort of a view called `name`, if that is the newest thing it did."""
        last = self.last(name)
        return last if last is not None and last.verb in TERMINAL_VERBS else None

    def _catch_up(self) -> None:
        new = self.files.tail(FILE, self._offset)
        if new is None:  # the file was replaced: read it again from the start
            self._offset, self._last = 0, {}
            new = self.files.tail(FILE, 0) or b""
        end = new.rfind(b"\n") + 1  # a line still being written is read next time
        for entry in _parse(new[:end].decode("utf-8", "replace").splitlines()):
            self._last[entry.name] = entry
        self._offset += end


def _parse(lines: Iterable[str]) -> Iterator[VerbEntry]:
    for line in lines:
        parts = line.rstrip("\n").split(" ", 4)
        if len(parts) >= 4 and parts[0].isdigit():
            yield VerbEntry(int(parts[0]), parts[1], parts[2], parts[3], parts[4] if len(parts) > 4 else "")
