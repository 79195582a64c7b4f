"""Packing a disk store's loose refs into `packed-refs`, for tests of how the store reads that file.

No command writes packed-refs: the store reads one (and removes entries from it on delete), so these
tests make one the way git's `pack-refs --all` would, under every ref's lock and the file's own."""

from __future__ import annotations

from reelstore.crashpoints import crash_point
from reelstore.storage.refs import DiskRefStore


def pack_refs(store: DiskRefStore) -> int:
    """Move every loose ref into packed-refs (under every ref's lock); returns how many moved."""
    names = [n for n in store.names() if store._path(n).is_file()]
    if not names:
        return 0
    store._lock(names)
    try:
        with store._packed_locked():
            packed = store._packed()
            for n in names:
                value = store._read(n)
                if value is not None:
                    packed[n] = value
            store._write_packed(packed)
            crash_point("refs:packed-rewritten")
            for n in names:
                store._path(n).unlink(missing_ok=True)
                store._prune_dirs(store._path(n).parent)
    finally:
        store._unlock(names)
    return len(names)
