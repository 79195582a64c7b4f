"""A writer's pack roll-up: past a limit of packs, the small ones are merged geometrically (git's
`repack --geometric`). Every pack smaller than `factor` times all the smaller ones together joins one
new pack, each object with its mtime. Only small packs (ROLL_UP_BYTES together) are merged; gc merges
the rest. Nothing is dropped, so it needs no reachability and can run while others write; not while gc
runs: it holds gc's lock, `.reel/gc.lock`, and is skipped while gc, prune, repack or another roll-up
holds it. (Checking the lock without taking it let a gc start mid-roll-up, see packs the roll-up was
deleting, index first, as packs without an index, and refuse with E007.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from reelstore.backend.fileio import write_new
from reelstore.backend.packs.gc_lock import GC_LOCK, gc_lock_line
from reelstore.backend.packs.pack_set import pack_count
from reelstore.crashpoints import crash_point
from reelstore.objects.hash import Hash

if TYPE_CHECKING:
    from reelstore.backend.disk_store import DiskObjectStore
    from reelstore.backend.packs.pack_item import PackItem

ROLL_UP_BYTES = 32 << 20
"""The most bytes of packs one roll-up merges (it holds them in memory)."""


def roll_up(store: DiskObjectStore, limit: int, factor: int = 2) -> str | None:
    """The merged pack's name, or None when the store has at most `limit` packs, there is nothing worth
    merging, or gc's lock is held (the merge is then left to a later write; it never fails this one)."""
    if pack_count(store.pack_dir) <= limit:  # counted without opening any
        return None
    lock = store.root.parent / GC_LOCK
    try:  # gc's own line, so gc takes over the lock of a roll-up killed here
        write_new(lock, gc_lock_line(), fsync=False)
    except OSError:  # held (or not writable)
        return None
    try:
        return _merge(store, limit, factor)
    finally:
        lock.unlink(missing_ok=True)


def _merge(store: DiskObjectStore, limit: int, factor: int) -> str | None:
    store.refresh(force=True)  # the packs as they are now that no gc can remove any
    packs = sorted(store.packs(), key=lambda p: p.count)
    if len(packs) <= limit:
        return None
    roll, acc = 0, 0
    for i, pack in enumerate(packs):
        if i and pack.count >= factor * acc:
            continue
        if sum(p.size for p in packs[: i + 1]) > ROLL_UP_BYTES:
            break
        roll, acc = i + 1, acc + pack.count
    chosen = packs[:roll]
    if len(chosen) < 2:
        return None
    from reelstore.backend.packs.pack_item import PackItem  # the writer: loaded only when there is a merge
    from reelstore.backend.packs.pack_write import write_pack

    items: dict[Hash, PackItem] = {}
    for pack in chosen:
        for h, _, mtime in pack.entries():
            if h not in items or items[h].mtime < mtime:
                items[h] = PackItem(h, pack.get_raw(h), mtime)
    result = write_pack(store.pack_dir, items.values(), fsync=store.fsync)
    crash_point("roll-up:written")
    for pack in chosen:
        if pack.name != result.name:
            pack.path.with_suffix(".idx").unlink(missing_ok=True)
            pack.path.unlink(missing_ok=True)
    store.refresh(force=True)
    return result.name
