"""Many reads in a row from one store (`cat-file --batch`), each object hashed once.

The store's packs are listed once per reader, and each id goes straight to their indexes: one
lookup per pack, one CRC check, one inflation and one BLAKE3 of the canonical bytes, which are then
trusted (no second hash, no re-parsing of the kind tag). Once a reader has looked up more than an
eighth of a pack's ids, it maps that pack's ids to positions in a dict (built once, up to
MAP_LIMIT ids), so each later lookup is one probe instead of a search. Anything the packs do not
hold (a loose object, a pack written since, a segment) goes through the store's own `get_raw`,
which rescans and verifies the same way, so a reader sees what the store sees.
"""

from __future__ import annotations

from reelstore.errors import BadInput, NotFound, StorageError
from reelstore.objects import Hash
from reelstore.objects.block import blob_content
from reelstore.storage.disk_store import DiskObjectStore
from reelstore.storage.object_store import ObjectStore
from reelstore.storage.pack import KIND_NAMES, Pack

MAP_LIMIT = 1 << 18
"""Packs with more ids than this are always searched (a dict of them would cost ~100 bytes an id)."""


class _Lookup:
    """One pack as a reader sees it: searched until mapped."""

    __slots__ = ("pack", "searches", "positions")

    def __init__(self, pack: Pack) -> None:
        self.pack = pack
        self.searches = 0
        self.positions: dict[bytes, int] | None = None

    def find(self, h: bytes) -> int:
        """Search the index, until enough searches make mapping the pack's ids worth it."""
        if self.positions is not None:
            return self.positions.get(h, -1)
        self.searches += 1
        if self.searches * 8 > self.pack.count and self.pack.count <= MAP_LIMIT:
            self.positions = self.pack.index.positions()
        return self.pack.index.find(h)


class BulkReader:
    """Verified (kind, content) of object after object from `store`."""

    def __init__(self, store: ObjectStore) -> None:
        self.store = store
        # A thread with an open write batch reads its pending objects through get_raw.
        disk = isinstance(store, DiskObjectStore) and not store.batch_open
        self._packs = [_Lookup(p) for p in store.packs()] if isinstance(store, DiskObjectStore) and disk else []

    def read(self, h: bytes) -> tuple[str, memoryview] | None:
        """(kind, content) of the object `h` (a blob's data, any other kind's body), or None if the store
        has none; E007 if its copy is damaged."""
        for lookup in self._packs:
            positions = lookup.positions
            i = positions.get(h, -1) if positions is not None else lookup.find(h)
            if i >= 0:
                code, raw = lookup.pack.read(h, i)
                kind = KIND_NAMES[code]
                start = len(kind) + 1
                break
        else:
            try:
                raw = self.store.get_raw(Hash(h))
            except NotFound:
                return None
            nul = raw.index(b"\0")
            kind, start = raw[:nul].decode("ascii"), nul + 1
        if kind != "blob":
            return kind, memoryview(raw)[start:]
        try:
            return kind, blob_content(raw, start)
        except BadInput as err:  # bytes enter a store only decoded: a right hash over a bad body is damage
            raise StorageError(f"object {h.hex()} is damaged: {err.message}", id=Hash(h)) from None
