"""One operation's new objects on their way to disk (group commit), before its ref moves.

The first object is held in memory; from the second on they stream into a `PackBatch` (one pack, one
fsync). A batch that ends holding one object, whose shard directory exists, writes it as one loose file
instead: the same two fsyncs as a pack (the file and its directory), and no pack that every later lookup
must open. A fork writes one view; each fork's pack used to stay until the roll-up's limit (32 packs),
and every later read that missed in packs opened all of them.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from reelstore.backend.object_store import LooseObjectStore
from reelstore.objects.hash import Hash

if TYPE_CHECKING:  # loaded with the second object: a lone one never needs the pack writer
    from reelstore.backend.packs.batch import PackBatch


class WriteBatch:
    """The objects one thread has put since its outermost batch opened, readable only through it."""

    def __init__(self, pack_dir: Path, loose: LooseObjectStore, *, fsync: bool) -> None:
        self.pack_dir = pack_dir
        self.loose = loose
        self.fsync = fsync
        self._one: tuple[Hash, bytes, int] | None = None
        self._pack: PackBatch | None = None

    def __contains__(self, h: object) -> bool:
        if self._pack is not None:
            return h in self._pack
        return self._one is not None and self._one[0] == h

    def add(self, h: Hash, raw: bytes, mtime: int) -> None:
        """Take one verified object (a second copy of the same id is ignored)."""
        if self._pack is None:
            if self._one is None:
                self._one = (h, raw, mtime)
                return
            if self._one[0] == h:
                return
            self._pack = self._start_pack(*self._one)
            self._one = None
        self._pack.add(h, raw, mtime)

    def _start_pack(self, h: Hash, raw: bytes, mtime: int) -> PackBatch:
        from reelstore.backend.packs.batch import PackBatch

        pack = PackBatch(self.pack_dir, fsync=self.fsync)
        pack.add(h, raw, mtime)
        return pack

    def get_raw(self, h: Hash) -> bytes | None:
        """Canonical bytes of an object added to this batch, or None."""
        if self._pack is not None:
            return self._pack.get_raw(h)
        return self._one[1] if self._one is not None and self._one[0] == h else None

    def discard(self) -> None:
        """Drop everything: the operation never reached its commit point."""
        self._one = None
        if self._pack is not None:
            self._pack.discard()

    def finish(self) -> str | None:
        """Make the batch durable; the new pack's name, or None when no pack was written (one loose
        file, or nothing)."""
        one, self._one = self._one, None
        if self._pack is not None:
            return self._pack.finish()
        if one is None:
            return None
        h, raw, mtime = one
        if self.loose.path(h).parent.is_dir():
            self.loose.put_verified([(h, raw)])
            return None
        return self._start_pack(h, raw, mtime).finish()  # a new shard would cost a third fsync: a pack
