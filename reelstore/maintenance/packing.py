"""The one new pack of what gc or repack keeps: entries of verified packs copied as stored, the rest read,
re-hashed and packed afresh, versions of a file side by side."""

from __future__ import annotations

import collections
import itertools
from collections.abc import Callable, Mapping
from typing import cast

from reelstore.errors import BadInput, StorageError
from reelstore.maintenance.mark import HELD_RAW
from reelstore.maintenance.reach import Walk
from reelstore.maintenance.selection import Selection
from reelstore.objects import Hash
from reelstore.storage.object_store import ObjectStore
from reelstore.storage.pack_copy import Reuse
from reelstore.storage.pack_item import PackItem, PackOptions, PackResult
from reelstore.storage.repo import Repo


def _versions(w: Walk) -> set[str]:
    """Versions of a file: a name hint that several objects of one sort share (leaves, or objects the
    walk read), e.g. the blobs of one path, or the tree nodes at one place in the namespace."""
    hints = w.hints
    read = collections.Counter(map(hints.get, w.kinds))
    unread = collections.Counter(hints.values())
    unread.subtract({name: count for name, count in read.items() if name})
    return {name for group in (read, unread) for name, count in group.items() if name and count > 1}


def write_kept(store: ObjectStore, repo: Repo, chosen: Selection, w: Walk, skipped: list[Hash] | None,
               damaged: Callable[[Hash], None] | None, tick: Callable[[int, int], None] | None,
               held: Mapping[bytes, bytes]) -> PackResult:
    """One new pack of what `chosen` keeps: entries of verified packs copied as they are stored, the rest
    (loose objects, objects of packs that do not verify) read, re-hashed and compressed afresh, one at a
    time. An object that cannot be read is left out and named in `skipped` (with no `skipped`, StorageError)."""
    hints = cast(Mapping[bytes, str], w.hints)  # keyed by Hash, looked up by the index's plain bytes
    versions = _versions(w)
    reuse = [Reuse(listing.pack, positions, mtimes, listing.columns, hints, versions)
             for listing, positions, mtimes in chosen.reuse if positions]
    items: list[PackItem] = []
    # In walk order (newest history first), so each version of a file is packed beside its neighbours.
    walked = [h for h in w.kinds if h in chosen.fresh]
    for h in itertools.chain(walked, chosen.fresh.keys() - walked):
        try:
            items.append(_item(store, h, w.kinds.get(h, ""), chosen.fresh[h], w.hints.get(h, ""), held.get(h)))
        except StorageError:
            if skipped is None:
                raise
            # Unreachable, young and unreadable (gc): nothing can be packed; a loose copy stays for fsck.
            chosen.kept -= 1
            chosen.loose_kept.discard(h)
            skipped.append(h)
    return store.add_pack(items, _pack_options(repo), progress=tick, reuse=reuse, damaged=damaged)


def _item(store: ObjectStore, h: Hash, kind: str, mtime: int, hint: str, raw: bytes | None) -> PackItem:
    """A pack item read by the pack writer when it gets to it, unless the walk kept its bytes (`raw`). An
    object the walk did not read is read now, to learn its kind (and, if small, kept: the unreachable
    young are few)."""
    if raw is not None:
        return PackItem(h, raw, mtime, hint)
    if not kind:
        raw = store.get_raw(h)
        if len(raw) <= HELD_RAW:
            return PackItem(h, raw, mtime, hint)
        kind = raw[: raw.index(b"\0")].decode("ascii")
    return PackItem(h, b"", mtime, hint, kind=kind, load=lambda: store.get_raw(h))


def _pack_options(repo: Repo) -> PackOptions:
    opts = PackOptions()
    for key, attr in (("pack.depth", "depth"), ("pack.window", "window"), ("pack.compression", "level")):
        value = repo.config.get(key)
        if value is not None:
            if not value.lstrip("-").isdigit():
                raise BadInput(f"config {key} must be an integer, not {value!r}")
            setattr(opts, attr, int(value))
    return opts
