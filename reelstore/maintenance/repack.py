"""`reel repack`: pack the loose objects (or every object into one pack), dropping nothing."""

from __future__ import annotations

from dataclasses import dataclass, field

from reelstore.maintenance.lock import gc_lock, no_cycle_collection, on_disk
from reelstore.maintenance.mark import Progress, Reader, find_leaves, list_packs
from reelstore.maintenance.packing import write_kept
from reelstore.maintenance.reach import ref_roots, walk
from reelstore.maintenance.selection import Selection
from reelstore.storage.repo import Repo


@dataclass
class RepackReport:
    """What a repack did (as JSON, its fields)."""

    pack: str | None = None
    packed: int = 0
    packs_removed: int = 0
    loose_removed: int = 0
    methods: dict[str, int] = field(default_factory=dict)


def repack(
    repo: Repo, *, all_objects: bool = False, delete: bool = False, progress: Progress | None = None
) -> RepackReport:
    """Pack the loose objects (with `all_objects`, every object, into one pack); with `delete`, remove the
    loose copies now packed and (with `all_objects`) the old packs. Nothing unreachable is dropped."""
    store = on_disk(repo)
    report = RepackReport()
    with gc_lock(repo), no_cycle_collection():
        store.refresh(force=True)
        loose = store.loose_files()
        every = list_packs(store)
        listed = every if all_objects else []
        if not loose and not any(listing.ids for listing in listed):
            return report
        count = (lambda n: progress("counting objects", n, None)) if progress else None
        leaves, direct = find_leaves(every)
        reader = Reader(store, direct)
        w = walk(store, ref_roots(repo.refs, None), progress=count, leaves=leaves, read=reader)
        tick = (lambda n, total: progress("packing", n, total)) if progress else None
        result = write_kept(store, repo, Selection(listed, loose, w, None), w, None, None, tick,
                            reader.held)
        report.pack, report.packed, report.methods = result.name, result.count, result.methods
        if delete:
            for listing in listed:
                if listing.pack.name != result.name:
                    store.remove_pack(listing.pack)
                    report.packs_removed += 1
            for n, (h, listed_mtime) in enumerate(loose.items(), 1):
                if store.remove_if_unchanged(h, listed_mtime, None):
                    report.loose_removed += 1
                if progress is not None and (n % 1000 == 0 or n == len(loose)):
                    progress("removing loose objects", n, len(loose))
        store.refresh(force=True)
    return report
