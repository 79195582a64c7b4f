"""`reel repack`: the disk store packs its loose objects (or every object into one pack), dropping
nothing; the walk only tells it the kinds and names that place versions of a file side by side."""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Set as AbstractSet

from reelstore.backend.disk_store import on_disk
from reelstore.backend.repo import Repo
from reelstore.backend.upkeep import Progress, RepackReport
from reelstore.maintenance.lock import gc_lock, no_cycle_collection
from reelstore.maintenance.reach import Walk, ref_roots, walk
from reelstore.objects import Hash


def repack(
    repo: Repo, *, all_objects: bool = False, delete: bool = False, progress: Progress | None = None
) -> RepackReport:
    """Pack the loose objects (with `all_objects`, every object, into one pack); with `delete`, remove the
    loose copies now packed and (with `all_objects`) the old packs. Nothing unreachable is dropped."""
    store = on_disk(repo.objects, "repack")
    count = (lambda n: progress("counting objects", n, None)) if progress else None

    def names(leaves: AbstractSet[bytes] | None, read: Callable[[Hash], bytes] | None) -> Walk:
        return walk(store, ref_roots(repo.refs, None), progress=count, leaves=leaves, read=read)

    with gc_lock(repo), no_cycle_collection():
        return store.repack(names, all_objects=all_objects, delete=delete, progress=progress)
