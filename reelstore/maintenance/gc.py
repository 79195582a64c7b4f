"""Garbage collection: mark from refs and young reflog entries (mark.py), decide what stays (selection.py),
pack it into one pack (packing.py), then sweep: delete the old packs, and the loose files and temporary
files that are unreachable and older than the grace period (age.py), all under gc.lock (lock.py).

Safety beside concurrent writers rests on three rules, as in git: candidates are listed *before* the
mark, so anything written during gc is not a candidate; an object is deleted only if it is unreachable
and its mtime (loose file, or the mtime recorded in the pack index) is older than the grace period; and
a loose file is removed only if its mtime has not moved since it was listed (a writer that re-put it
freshened it). A writer must re-put an old object it starts to reference; with `--prune=now` there is no
grace period, and a concurrent writer can lose such an object, exactly as with `git gc --prune=now`.
(`ObjectStore.reuse`, which a fork uses for its capabilities, skips the re-put only when its in-flight
registration, the free gc.lock and a copy younger than a day together make it safe.)
"""

from __future__ import annotations

import time
from collections.abc import Collection
from dataclasses import dataclass, field, fields
from typing import Any

from reelstore.errors import StorageError
from reelstore.maintenance.age import DEFAULT_PRUNE_EXPIRE, config_cutoff, parse_age
from reelstore.maintenance.lock import gc_lock, no_cycle_collection
from reelstore.maintenance.mark import Progress, Reader, find_leaves, list_packs, mark, require_complete
from reelstore.maintenance.packing import write_kept
from reelstore.maintenance.selection import Selection
from reelstore.objects import Hash
from reelstore.objects.hash import as_hash
from reelstore.storage.repo import Repo


@dataclass
class GcReport:
    """What a gc found and did."""

    reachable: int = 0
    candidates: int = 0
    kept_recent: int = 0
    """Unreachable but younger than the grace period: kept (and packed, with their mtimes)."""
    pruned: int = 0
    """Unreachable and old: gone (or, with dry_run, would be)."""
    packed: int = 0
    pack: str | None = None
    packs_removed: int = 0
    loose_removed: int = 0
    temp_removed: int = 0
    """Temporary files left by a killed writer (older than an hour)."""
    dry_run: bool = False
    damaged_skipped: list[Hash] = field(default_factory=list)
    """Unreachable young objects that could not be read, so not packed (fsck names them)."""
    _pruned: Collection[bytes] = field(default_factory=list, repr=False, compare=False)

    @property
    def pruned_ids(self) -> list[Hash]:
        """The ids pruned (with dry_run, to be), sorted: built when first asked for, since a large gc's
        report is mostly read for its counts."""
        if not isinstance(self._pruned, list):
            self._pruned = sorted(map(as_hash, self._pruned))
        return list(self._pruned)

    @pruned_ids.setter
    def pruned_ids(self, ids: Collection[bytes]) -> None:
        self._pruned = ids

    def to_json(self) -> dict[str, Any]:
        doc = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("_pruned", "damaged_skipped")}
        doc["pruned_ids"] = [h.hex() for h in self.pruned_ids]
        doc["damaged_skipped"] = [h.hex() for h in self.damaged_skipped]
        return doc


TEMP_AGE = 3600
"""A temporary file older than this (seconds) is left over from a crash: no writer holds one that long."""


def gc(
    repo: Repo,
    prune: str | None = None,
    *,
    dry_run: bool = False,
    progress: Progress | None = None,
    wait_s: float = 0.0,
    now: float | None = None,
) -> GcReport:
    """Mark, keep the young unreachable, pack the rest into one pack, delete the old unreachable.

    `prune` is an AGE (`now`, `2.weeks.ago`, `never`…); None reads `gc.pruneExpire` (default two weeks).
    """
    now = time.time() if now is None else now
    cutoff = parse_age(prune, now) if prune is not None else config_cutoff(
        repo, "gc.pruneExpire", DEFAULT_PRUNE_EXPIRE, now)
    store = repo.objects
    if not store.keeps_files:
        return _gc_memory(repo, cutoff, dry_run, now)
    with gc_lock(repo, wait_s), no_cycle_collection():
        # The work runs in a frame of its own, so all it built is freed before the collector resumes
        # (which would otherwise walk every container still alive once more).
        return _collect(repo, cutoff, dry_run, progress, now)


def _collect(repo: Repo, cutoff: float | None, dry_run: bool, progress: Progress | None, now: float) -> GcReport:
    """gc's work, under its lock: list, mark, select, pack, sweep."""
    store = repo.objects
    store.refresh(force=True)
    loose = store.loose_files()
    listed = list_packs(store)
    leaves, direct = find_leaves(listed)
    reader = Reader(store, direct)
    w = mark(repo, now, progress, leaves, reader)
    del leaves, direct  # a set of every leaf id: let go before the copy plan's columns are built
    reader.direct = {}
    require_complete(w, "gc")
    chosen = Selection(listed, loose, w, cutoff)
    report = GcReport(reachable=len(w.reachable), candidates=chosen.candidates, dry_run=dry_run)
    report.kept_recent = chosen.young
    report.pruned_ids = chosen.pruned
    report.pruned = len(chosen.pruned)
    report.packed = chosen.kept
    if dry_run:
        return report

    def damaged(h: Hash) -> None:
        if h in w.reachable:
            raise StorageError(f"gc refused: object {h.hex()} is damaged in its pack (its entry does not "
                               "match its checksum); run `reel fsck`", id=h)
        # Unreachable and young: not packed; a loose copy, if any, stays for fsck.
        chosen.kept -= 1
        chosen.loose_kept.discard(h)
        report.damaged_skipped.append(h)

    current = None
    if len(listed) == 1 and not loose and chosen.kept == listed[0].pack.count:
        current = listed[0].pack.name
    elif chosen.kept:
        tick = (lambda n, total: progress("packing", n, total)) if progress else None
        current = write_kept(store, repo, chosen, w, report.damaged_skipped, damaged, tick, reader.held).name
    report.packed = chosen.kept
    report.pack = current
    for listing in listed:
        if listing.pack.name != current:
            store.remove_pack(listing.pack)
            report.packs_removed += 1
    for n, (h, listed_mtime) in enumerate(loose.items(), 1):
        kept = h in chosen.loose_kept
        if store.remove_if_unchanged(h, listed_mtime, None if kept else cutoff):
            report.loose_removed += 1
        if progress is not None and (n % 1000 == 0 or n == len(loose)):
            progress("removing loose objects", n, len(loose))
    report.temp_removed = store.sweep_temp(now - TEMP_AGE)
    store.refresh(force=True)
    return report


def _gc_memory(repo: Repo, cutoff: float | None, dry_run: bool, now: float) -> GcReport:
    """An in-memory store keeps no mtimes: every unreachable object counts as old."""
    w = mark(repo, now, None, None)
    require_complete(w, "gc")
    store = repo.objects
    everything = set(store)
    report = GcReport(reachable=len(w.reachable), candidates=len(everything), dry_run=dry_run)
    drop = sorted(everything - w.reachable) if cutoff is not None else []
    report.pruned, report.pruned_ids, report.packed = len(drop), drop, len(everything) - len(drop)
    report.kept_recent = len(everything - w.reachable) - len(drop)
    if not dry_run:
        for h in drop:
            store.delete(h)
    return report
