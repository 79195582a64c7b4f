"""`commit --remote --retry N`: a commit that lost the remote trunk's compare-and-swap tries again.

Stores committing on one synced trunk race for it; the loser of a race changed nothing (the fence
refused before the local trunk moved or any effect was sent), so trying again is safe. Between tries
the loser fetches, which fast-forwards its trunk to the winner's record, and the next try replays the
view's changes onto that trunk, as any commit onto a trunk that moved since the fork does.

The wait before each try grows exponentially and is drawn uniformly from zero up to that bound (full
jitter): stores that lost the same race spread out instead of colliding again in step, and no store
keeps an edge because it happens to be the quickest to come back.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TypeVar

from reelstore.backend.repo import Repo
from reelstore.errors import BadInput, RemoteConflict, RemoteRaceLost

T = TypeVar("T")

MAX_RETRIES = 100
"""The most `--retry` accepts: every try is a fetch and a push."""
FIRST_WAIT = 0.05
"""Seconds: the bound of the first wait; it doubles after each lost race, up to `LONGEST_WAIT`."""
LONGEST_WAIT = 2.0


def check_retries(retries: int) -> int:
    """E014 unless `retries` is a count the loop below can honour."""
    if isinstance(retries, bool) or not isinstance(retries, int) or not 0 <= retries <= MAX_RETRIES:
        raise BadInput(f"retry must be a whole number from 0 to {MAX_RETRIES}, not {retries!r}", field="retry")
    return retries


def lost_race(exc: RemoteConflict) -> bool:
    """Did another store move the remote first (a try after a fetch may win), rather than the commit
    being refused for good (a bound view at the wrong remote, a view aborted or committed elsewhere)?"""
    return isinstance(exc, RemoteRaceLost)


def wait(attempt: int) -> float:
    """Seconds to wait before try `attempt + 1`: uniform in [0, min(LONGEST_WAIT, FIRST_WAIT * 2**attempt))."""
    bound = min(LONGEST_WAIT, FIRST_WAIT * (1 << min(attempt, 16)))
    return bound * int.from_bytes(os.urandom(4), "big") / 2**32


def retrying(repo: Repo, remote: str, retries: int, once: Callable[[], T], *, lost: list[str] | None = None) -> T:
    """`once()` (a commit fenced on `remote`); each time it loses the remote race, wait, fetch `remote`
    and call it again, at most `retries` more times. The last loss is raised as it came (E015), with
    the number of tries in its details. Each loss is described in `lost`, if given."""
    from reelstore.sync.fetch import fetch  # on use: a commit that wins at once never fetches

    check_retries(retries)
    for attempt in range(retries + 1):
        try:
            return once()
        except RemoteConflict as exc:
            if attempt == retries or not lost_race(exc):
                if attempt:
                    exc.details["tries"] = attempt + 1
                raise
            if lost is not None:
                lost.append(f"try {attempt + 1} lost the race on remote {remote}: {exc.message}")
        time.sleep(wait(attempt))
        fetch(repo, remote)
    raise AssertionError("unreachable: the last try returns or raises")
