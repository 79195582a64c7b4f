"""The recovery epoch (`.reel/epoch`): the fence between a drainer and the recovery that replaced it.

Every drain runs under the epoch it read when it started. `reel recover` bumps the epoch before it
resumes anything, so a drainer that is still alive somewhere (a zombie) holds an older number. The
journal append and the fire token's consumption both compare the drainer's epoch with the store's
*while holding the store's drain lock*, the same lock a bump takes, so a fenced drainer can neither
journal nor fire (E016). The lock is an `flock` on `.reel/epoch.lock`: a process killed while holding
it releases it, so a crash never leaves a stale lock behind.
"""

from __future__ import annotations

import fcntl
import os
import threading
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from reelstore.errors import Conflict, StaleEpoch, StorageError
from reelstore.storage.fileio import atomic_write

if TYPE_CHECKING:
    from reelstore.storage.repo import Repo

FILE = "epoch"
LOCK = "epoch.lock"
LOCK_WAIT_S = 30.0


@dataclass
class MemoryState:
    """What an in-memory store keeps instead of `.reel/epoch` and `.reel/HOLD`."""

    epoch: int = 0
    hold: dict[str, Any] | None = None
    lock: threading.RLock = field(default_factory=threading.RLock)


_MEMORY: weakref.WeakKeyDictionary[Repo, MemoryState] = weakref.WeakKeyDictionary()


def memory_state(repo: Repo) -> MemoryState:
    state = _MEMORY.get(repo)
    if state is None:
        state = _MEMORY[repo] = MemoryState()
    return state


def current(repo: Repo) -> int:
    """The store's epoch (0 before the first recovery)."""
    if repo.path is None:
        return memory_state(repo).epoch
    try:
        text = (repo.path / FILE).read_text("ascii").strip()
    except FileNotFoundError:
        return 0
    except (OSError, UnicodeDecodeError) as exc:
        raise StorageError(f"cannot read {repo.path / FILE}: {exc}") from None
    if not text.isdigit():
        raise StorageError(f"{repo.path / FILE} is damaged: {text[:40]!r} is not an epoch number")
    return int(text)


@contextmanager
def locked(repo: Repo) -> Iterator[None]:
    """Hold the store's drain lock: epoch bumps and journal appends are serialised under it."""
    if repo.path is None:
        with memory_state(repo).lock:
            yield
        return
    fd = os.open(repo.path / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + LOCK_WAIT_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise Conflict(f"the drain lock {repo.path / LOCK} stayed busy for {LOCK_WAIT_S:.0f}s") from None
                time.sleep(0.002)
        yield
    finally:
        os.close(fd)


def check(repo: Repo, epoch: int) -> None:
    """Raise StaleEpoch unless `epoch` is still the store's. Call it under `locked(repo)`."""
    now = current(repo)
    if epoch != now:
        raise StaleEpoch(f"this drainer runs under epoch {epoch} but the store is at epoch {now}: "
                         "a recovery has taken over; this process may neither journal nor fire", epoch=epoch,
                         current=now)


def bump(repo: Repo) -> int:
    """Start a new epoch (under the lock) and return it; every older drainer is fenced from now on."""
    with locked(repo):
        new = current(repo) + 1
        if repo.path is None:
            memory_state(repo).epoch = new
        else:
            fsync = repo.config.get_bool("core.fsync", True)
            atomic_write(repo.path / FILE, f"{new}\n".encode("ascii"), fsync=fsync)
        return new
