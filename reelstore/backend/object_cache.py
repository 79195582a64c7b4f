"""Decoded objects a store has recently read or written, kept per open store.

Objects are immutable, so a decoded one never goes stale; the kernel rereads the same views, records
and capabilities on every verb. Blobs are not kept (their data may be large).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeVar

from reelstore.backend.object_store import ObjectStore, expect_kind
from reelstore.objects import Hash, Object

CACHE_SIZE = 4096
T = TypeVar("T", bound=Object)


class ObjectCache:
    """A bounded map id -> decoded object in front of one object store (cleared whole when full)."""

    def __init__(self, objects: ObjectStore, size: int = CACHE_SIZE) -> None:
        self.objects = objects
        self.size = size
        self._map: dict[Hash, Object] = {}

    def load(self, h: Hash, cls: type[T]) -> T:
        """`objects.get_as(h, cls)`, remembered."""
        obj = self._map.get(h)
        if obj is None:
            obj = self.objects.get(h)
            if len(self._map) >= self.size:
                self._map.clear()
            self._map[h] = obj
        return expect_kind(obj, cls)

    def save(self, objects: Iterable[Object]) -> None:
        """Store `objects` and remember them."""
        objects = list(objects)
        self.objects.put_many(objects)
        if len(self._map) + len(objects) >= self.size:
            self._map.clear()
        for obj in objects:
            if obj.kind != "blob":
                self._map[obj.id] = obj
