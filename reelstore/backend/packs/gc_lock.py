"""The lock gc, prune and repack hold (maintenance/lock.py) and a writer's pack roll-up holds too
(backend/packs/roll_up.py): its name under `.reel/` and the line that names its holder."""

from __future__ import annotations

import os
import time

from reelstore.backend.refdb.ref_format import HOST

GC_LOCK = "gc.lock"
"""The lock file's name, under `.reel/`."""


def gc_lock_line() -> bytes:
    """What `GC_LOCK` says of its holder, `PID HOST TIME`: written alike by gc, prune, repack and a roll-up,
    so each can tell (and take over) a lock that a dead one of the others left on this host."""
    return f"{os.getpid()} {HOST} {int(time.time())}\n".encode()
