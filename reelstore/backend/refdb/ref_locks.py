"""Ref lock files read back: what a lock says about its holder, whether that holder is provably dead,
and the E002 a writer reports when it finds a lock taken. The line a writer puts in its lock is
`ref_format.holder_line`.

A writer breaks a lock only when its holder is provably dead: a process of this host and of this
boot (the boot ids match) whose pid no longer runs. It breaks it under an flock every breaker takes
(`.reel/refs.break`), after reading the lock again there and finding the very same line: a lock
that changed meanwhile belongs to a new holder and is left alone. Any other lock (another host, a
live pid, an older reel's lock without a boot id) still needs the operator."""

from __future__ import annotations

import os
import time
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

from reelstore.backend.fileio import pid_alive
from reelstore.backend.refdb.ref_format import BOOT
from reelstore.backend.refdb.ref_format import HOST as _HOST
from reelstore.errors import LockHeld, StaleLock

LOCK_TIMEOUT = 600.0
"""Seconds after which a lock whose holder cannot be checked (another host) counts as stale."""


@dataclass(frozen=True, slots=True)
class LockInfo:
    """A lock file and what it says about its holder (pid and host are unknown for a lock written by
    an older reel, which left it empty)."""

    path: Path
    pid: int | None
    host: str | None
    age: float
    dead: bool
    """Provably dead: the holder is a process of this host that no longer runs."""
    stale: bool
    """Dead, or older than the lock timeout."""
    boot: str | None = None
    line: bytes = b""
    """The lock's content as read."""

    @property
    def breakable(self) -> bool:
        """Dead, and of this very boot: a writer may break it (`break_dead`)."""
        return self.dead and bool(BOOT) and self.boot == BOOT

    def holder(self) -> str:
        if self.pid is None:
            return "an unknown holder"
        return f"pid {self.pid} on {self.host}"

    def describe(self) -> str:
        why = "no longer running" if self.dead else "not checkable from here" if self.host != _HOST else "unknown"
        return f"{self.path.name} held by {self.holder()} ({why}), {self.age:.0f}s old"


def read_lock(path: Path, timeout: float = LOCK_TIMEOUT) -> LockInfo:
    """Who holds lock file `path`, how long it has been held and whether it is stale (older than
    `timeout` seconds, if its holder cannot be checked)."""
    try:
        st = path.stat()
        raw = path.read_bytes()
    except OSError:
        return LockInfo(path, None, None, 0.0, False, False)
    fields = raw.decode("utf-8", "replace").split()
    info = dict(zip(fields[::2], fields[1::2]))
    pid = int(info["pid"]) if info.get("pid", "").isdigit() else None
    host = info.get("host")
    since = int(info["time"]) if info.get("time", "").isdigit() else st.st_mtime
    age = max(0.0, time.time() - since)
    dead = pid is not None and host == _HOST and not pid_alive(pid)
    return LockInfo(path, pid, host, age, dead, dead or age > timeout, info.get("boot"), raw)


def break_dead(root: Path, lock: LockInfo) -> bool:
    """Remove `lock` if it still holds the same line and its holder is still provably dead, under the
    breakers' flock; True if the lock is gone (removed here or by another breaker)."""
    import fcntl

    fd = os.open(root / "refs.break", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        again = read_lock(lock.path)
        if again.pid is None and not again.line:
            return not lock.path.exists()
        if again.line != lock.line or not again.breakable:
            return False
        with suppress(FileNotFoundError):
            lock.path.unlink()
        return True
    finally:
        os.close(fd)


Locks = list[LockInfo]
"""A list of lock files (named so the annotation is not shadowed by `RefStore.list`)."""


def lock_conflict(name: str, lock: LockInfo) -> LockHeld:
    """E002 for a ref whose lock is taken: the live holder, or the stale lock and its remedy."""
    if lock.stale:
        return StaleLock(
            f"cannot lock ref {name}: its lock is stale ({lock.describe()}); nothing was written. "
            f"Remove it with `reel gc --clear-stale-locks`{'' if lock.dead else ' --force'} "
            f"(or delete {lock.path} once you know no reel process uses it)",
            ref=name,
            lock=str(lock.path),
        )
    return LockHeld(
        f"cannot lock ref {name}: {lock.path} is held by {lock.holder()} for {lock.age:.0f}s; another "
        "reel process is updating it",
        ref=name,
        lock=str(lock.path),
    )
