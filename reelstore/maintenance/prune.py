"""`reel prune`: the disk store deletes unreachable loose objects older than the grace period; packs are
untouched."""

from __future__ import annotations

import time

from reelstore.backend.disk_store import on_disk
from reelstore.backend.repo import Repo
from reelstore.backend.upkeep import PruneReport
from reelstore.maintenance.age import DEFAULT_PRUNE_EXPIRE, config_cutoff, parse_age
from reelstore.maintenance.lock import gc_lock
from reelstore.maintenance.mark import marker


def prune(repo: Repo, expire: str | None = None, *, dry_run: bool = False, now: float | None = None) -> PruneReport:
    """Delete unreachable loose objects older than `expire` (default gc.pruneExpire). Packs are untouched."""
    now = time.time() if now is None else now
    cutoff = (
        parse_age(expire, now)
        if expire is not None
        else config_cutoff(repo, "gc.pruneExpire", DEFAULT_PRUNE_EXPIRE, now)
    )
    store = on_disk(repo.objects, "prune")
    with gc_lock(repo):
        return store.prune(marker(repo, now, None, "prune"), cutoff, dry_run=dry_run)
