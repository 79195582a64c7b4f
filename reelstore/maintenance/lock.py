"""What gc, prune and repack hold while they run: `.reel/gc.lock` (one of them at a time per store, and
never beside a writer's pack roll-up, which holds it too; a lock left by a dead process of this host is
taken over), and Python's cycle collector paused."""

from __future__ import annotations

import gc as pygc
import time
from collections.abc import Iterator
from contextlib import contextmanager

from reelstore.backend.fileio import pid_alive
from reelstore.backend.packs.gc_lock import GC_LOCK as LOCK_NAME
from reelstore.backend.packs.gc_lock import gc_lock_line
from reelstore.backend.refdb.ref_format import HOST
from reelstore.backend.repo import Repo
from reelstore.errors import Conflict


@contextmanager
def gc_lock(repo: Repo, wait_s: float = 0.0) -> Iterator[None]:
    """Hold `.reel/gc.lock`. A lock left by a dead process on this host is taken over; a live one makes
    us wait up to `wait_s`, then fail with E002."""
    me = gc_lock_line()
    deadline = time.monotonic() + wait_s
    while not repo.files.create(LOCK_NAME, me):
        owner = _lock_owner(repo.files.read(LOCK_NAME))
        if owner is None:
            repo.files.remove(LOCK_NAME)
            continue
        if time.monotonic() >= deadline:
            where = repo.files.where(LOCK_NAME)
            raise Conflict(
                f"another gc is running ({owner}); wait for it, or remove {where} if it is not", path=where
            ) from None
        time.sleep(0.05)
    try:
        yield
    finally:
        repo.files.remove(LOCK_NAME)


@contextmanager
def no_cycle_collection() -> Iterator[None]:
    """Python's cycle collector paused for the duration: a gc holds a few hundred thousand small
    objects (ids, columns), which every full collection would walk again, for nothing to collect."""
    was = pygc.isenabled()
    pygc.disable()
    try:
        yield
    finally:
        if was:
            pygc.enable()


def _lock_owner(content: bytes | None) -> str | None:
    """A description of the live holder of the lock, or None if its holder is dead (stale lock)."""
    if content is None:
        return "a process that just released it"
    parts = content.decode("utf-8", "replace").split()
    if len(parts) >= 2 and parts[0].isdigit() and parts[1] == HOST and not pid_alive(int(parts[0])):
        return None
    return f"pid {parts[0]} on {parts[1]}" if len(parts) >= 2 else "unknown holder"
