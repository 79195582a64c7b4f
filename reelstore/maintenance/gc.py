"""Garbage collection: maintenance decides what is live (mark.py: the refs, young reflog entries and
the writes in flight) and the backend decides how its copies go (`ObjectStore.gc`: the disk store packs
what stays and deletes old files, backend/packs/pack_gc.py; a store without files deletes object by object),
all under gc.lock (lock.py).

Safety beside concurrent writers rests on three rules, as in git: the backend lists its candidates
*before* it calls the mark, so anything written during gc is not a candidate; an object is deleted only
if it is unreachable and its mtime is older than the grace period; and a copy is removed only if its
mtime has not moved since it was listed (a writer that re-put it freshened it). A writer must re-put an
old object it starts to reference; with `--prune=now` there is no grace period, and a concurrent writer
can lose such an object, exactly as with `git gc --prune=now`. (`ObjectStore.reuse`, which a fork uses
for its capabilities, skips the re-put only when its in-flight registration, the free gc.lock and a copy
younger than a day together make it safe.)
"""

from __future__ import annotations

import time

from reelstore.backend.repo import Repo
from reelstore.backend.upkeep import GcReport, Progress
from reelstore.maintenance.age import DEFAULT_PRUNE_EXPIRE, config_cutoff, parse_age
from reelstore.maintenance.lock import gc_lock, no_cycle_collection
from reelstore.maintenance.mark import marker


def gc(
    repo: Repo,
    prune: str | None = None,
    *,
    dry_run: bool = False,
    progress: Progress | None = None,
    wait_s: float = 0.0,
    now: float | None = None,
) -> GcReport:
    """Mark, keep the live and the young unreachable, drop the old unreachable (the disk store keeps
    what stays in one pack).

    `prune` is an AGE (`now`, `2.weeks.ago`, `never`…); None reads `gc.pruneExpire` (default two weeks).
    """
    now = time.time() if now is None else now
    cutoff = (
        parse_age(prune, now) if prune is not None else config_cutoff(repo, "gc.pruneExpire", DEFAULT_PRUNE_EXPIRE, now)
    )
    with gc_lock(repo, wait_s), no_cycle_collection():
        # The work runs in a frame of its own, so all it built is freed before the collector resumes
        # (which would otherwise walk every container still alive once more).
        return repo.objects.gc(marker(repo, now, progress, "gc"), cutoff, dry_run=dry_run, progress=progress, now=now)
