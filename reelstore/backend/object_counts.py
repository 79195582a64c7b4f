"""git's `count-objects -v` figures for an on-disk store: read straight from its directories and packs."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from reelstore.backend.disk_store import DiskObjectStore


def count_objects(store: DiskObjectStore) -> dict[str, int]:
    """git's count-objects -v figures: loose count and KiB, packed objects, packs and their KiB,
    loose objects that are also packed, and stray files (temporary files, unusable packs) and their KiB."""
    store.refresh(force=True)
    stats = dict.fromkeys(
        ("count", "size", "in-pack", "packs", "size-pack", "prune-packable", "garbage", "size-garbage"), 0
    )
    size = garbage_size = 0
    packs = store.packs()
    for h in store.loose:
        stats["count"] += 1
        try:
            size += store.loose.path(h).stat().st_size
        except FileNotFoundError:
            continue
        if any(h in p for p in packs):
            stats["prune-packable"] += 1
    for pack in packs:
        stats["packs"] += 1
        stats["in-pack"] += pack.count
        stats["size-pack"] += pack.size + pack.index.path.stat().st_size
    for d in (store.root, store.pack_dir):
        if not d.is_dir():
            continue
        for entry in os.scandir(d):
            if entry.is_file() and (
                d == store.root
                or entry.name.startswith(".")
                or entry.name.rsplit(".", 1)[0] not in {p.name for p in packs}
            ):
                stats["garbage"] += 1
                garbage_size += entry.stat().st_size
    for shard in os.scandir(store.root):
        if len(shard.name) == 2 and shard.is_dir():
            for entry in os.scandir(shard.path):
                if len(entry.name) != 62 or entry.name.startswith("."):
                    stats["garbage"] += 1
                    garbage_size += entry.stat().st_size
    stats["size"] = size // 1024
    stats["size-pack"] //= 1024
    stats["size-garbage"] = garbage_size // 1024
    return stats
