"""The recovery epoch (`.reel/epoch`): the fence between a drainer and the recovery that replaced it.

Every drain runs under the epoch it read when it started. `reel recover` bumps the epoch before it
resumes anything, so a drainer that is still alive somewhere (a zombie) holds an older number. The
journal append and the fire token's consumption both compare the drainer's epoch with the store's
*while holding the store's drain lock*, the same lock a bump takes, so a fenced drainer can neither
journal nor fire (E016). The lock is an `flock` on `.reel/epoch.lock`: a process killed while holding
it releases it, so a crash never leaves a stale lock behind.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from reelstore.errors import StaleEpoch, StorageError

if TYPE_CHECKING:
    from reelstore.backend.repo import Repo

FILE = "epoch"
LOCK = "epoch.lock"
LOCK_WAIT_S = 30.0


def current(repo: Repo) -> int:
    """The store's epoch (0 before the first recovery)."""
    raw = repo.files.read(FILE)
    if raw is None:
        return 0
    try:
        text = raw.decode("ascii").strip()
    except UnicodeDecodeError:
        text = repr(raw[:40])
    if not text.isdigit():
        raise StorageError(f"{repo.files.where(FILE)} is damaged: {text[:40]!r} is not an epoch number")
    return int(text)


@contextmanager
def locked(repo: Repo) -> Iterator[None]:
    """Hold the store's drain lock: epoch bumps and journal appends are serialised under it."""
    with repo.files.lock(LOCK, LOCK_WAIT_S):
        yield


def check(repo: Repo, epoch: int) -> None:
    """Raise StaleEpoch unless `epoch` is still the store's. Under `locked(repo)` to decide what to write;
    a fire token reads it without the lock (the file is replaced whole)."""
    now = current(repo)
    if epoch != now:
        raise StaleEpoch(
            f"this drainer runs under epoch {epoch} but the store is at epoch {now}: "
            "a recovery has taken over; this process may neither journal nor fire",
            epoch=epoch,
            current=now,
        )


def bump(repo: Repo) -> int:
    """Start a new epoch (under the lock) and return it; every older drainer is fenced from now on."""
    with locked(repo):
        new = current(repo) + 1
        repo.files.write(FILE, f"{new}\n".encode("ascii"))
        return new
