"""Objects an operation has written that no ref reaches yet: gc's fence against concurrent writers.

A writer puts its objects first and moves a ref last. Between the two its new objects are unreachable,
and a `gc --prune=now` that listed them (they are older than its start) and marked before the ref moved
would delete what the writer is about to reference. So every write first registers its object ids in
`.reel/inflight/<pid>-<thread>` (before the objects exist), and the writer's next ref transaction that
lands clears the file. One that fails clears nothing: the writer may retry it with objects it already
wrote (a commit whose trunk moved retries with the view and delta it materialised once); they stay
protected until a later transaction of the thread lands or the process ends. gc reads every live
writer's file after marking (and then re-reads the refs), and keeps what they name. A file whose
process is gone is stale and ignored (then removed).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from contextlib import suppress
from pathlib import Path

from reelstore.backend.fileio import pid_alive
from reelstore.objects import Hash

DIR = "inflight"


class Inflight:
    """The in-flight registry of one store (`root` is its `.reel` directory)."""

    def __init__(self, root: Path) -> None:
        self.dir = Path(root) / DIR
        self._mine = threading.local()

    def _path(self) -> Path:
        return self.dir / f"{os.getpid()}-{threading.get_ident()}"

    def register(self, ids: Iterable[Hash]) -> None:
        """Note ids this thread is about to write (call before writing them). Not fsynced: a crash ends
        the writer too, and only live writers' registrations count."""
        text = "".join(h.hex() + "\n" for h in ids)
        if not text:
            return
        path = self._path()
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        except FileNotFoundError:  # the directory is made on first use, not asked for on every write
            self.dir.mkdir(exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, text.encode("ascii"))
        finally:
            os.close(fd)
        self._mine.path = path

    def settle(self) -> None:
        """A ref transaction of this thread landed: what it registered needs no more protection."""
        path = getattr(self._mine, "path", None)
        if path is not None:
            path.unlink(missing_ok=True)
            self._mine.path = None

    def protected(self) -> set[Hash]:
        """Every id a live writer registered and has not settled yet. Files of dead writers are removed.
        The calling thread's own file is not read: while it runs gc it is not in the middle of a write."""
        out: set[Hash] = set()
        own = self._path().name
        try:
            entries = list(os.scandir(self.dir))
        except FileNotFoundError:
            return out
        for entry in entries:
            pid, _, _ = entry.name.partition("-")
            if entry.name == own:
                continue
            if not pid.isdigit() or not pid_alive(int(pid)):
                with suppress(OSError):
                    os.unlink(entry.path)
                continue
            try:
                with open(entry.path, "rb") as f:
                    lines = f.read().split(b"\n")
            except FileNotFoundError:
                continue
            for line in lines:
                if len(line) == 64:
                    with suppress(ValueError):
                        out.add(Hash(bytes.fromhex(line.decode("ascii"))))
        return out
