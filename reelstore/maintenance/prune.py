"""`reel prune`: delete unreachable loose objects older than the grace period; packs are untouched."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from reelstore.maintenance.age import DEFAULT_PRUNE_EXPIRE, config_cutoff, parse_age
from reelstore.maintenance.lock import gc_lock, on_disk
from reelstore.maintenance.mark import mark, require_complete
from reelstore.objects import Hash
from reelstore.storage.repo import Repo


@dataclass
class PruneReport:
    """What a prune removed (with dry_run, would remove) and how many young unreachable objects it kept."""

    dry_run: bool = False
    removed: list[Hash] = field(default_factory=list)
    kept_recent: int = 0


def prune(repo: Repo, expire: str | None = None, *, dry_run: bool = False, now: float | None = None) -> PruneReport:
    """Delete unreachable loose objects older than `expire` (default gc.pruneExpire). Packs are untouched."""
    now = time.time() if now is None else now
    cutoff = parse_age(expire, now) if expire is not None else config_cutoff(
        repo, "gc.pruneExpire", DEFAULT_PRUNE_EXPIRE, now)
    store = on_disk(repo)
    report = PruneReport(dry_run=dry_run)
    with gc_lock(repo):
        loose = store.loose_files()
        w = mark(repo, now, None, None)
        require_complete(w, "prune")
        for h, listed in sorted(loose.items()):
            if h in w.reachable:
                continue
            if cutoff is None or listed >= cutoff or h in w.inflight:
                report.kept_recent += 1
            elif dry_run or store.remove_if_unchanged(h, listed, cutoff):
                report.removed.append(h)
    return report
