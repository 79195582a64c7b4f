"""Pack indexes: the sorted ids of a pack with each entry's offset, CRC-32 and mtime, memory-mapped.

Lookup narrows to the fan-out bucket of the id's first byte and binary-searches the sorted ids. The
mtimes are git's `.mtimes` idea: packing keeps each object's age, so the gc grace period survives it.
Layout: docs/format.md, "Packs and pack indexes".
"""

from __future__ import annotations

import itertools
import mmap
import os
import struct
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import blake3

from reelstore.errors import StorageError
from reelstore.objects import Hash

if TYPE_CHECKING:  # array, bisect and binascii load where whole columns are read, an index built or hexed
    import array

IDX_MAGIC = b"RIDX"
VERSION = 1
TRAILER = 32
IDX_HEADER = struct.Struct(">4sII")
FANOUT = 256 * 4
ROW = 32 + 8 + 4 + 8
_U64 = struct.Struct(">Q").unpack_from
_U32 = struct.Struct(">I").unpack_from
SCAN_RUN = 128
"""Runs of ids this short are searched by one scan of the mapped bytes rather than by bisection."""


Columns = tuple[list[bytes], "array.array[int]", "array.array[int]", "array.array[int]"]
"""A pack index read whole: ids, offsets, CRCs, mtimes (see `PackIndex.columns`)."""


def index_bytes(rows: Sequence[tuple[bytes, int, int, int]], pack_checksum: bytes) -> bytes:
    """The .idx for (id, offset, crc, mtime) rows of a pack whose trailer is `pack_checksum`."""
    ids, offsets, crcs, mtimes = (list(column) for column in zip(*rows)) if rows else ([], [], [], [])
    return index_columns(ids, offsets, crcs, mtimes, pack_checksum)


def index_columns(
    ids: Sequence[bytes], offsets: Sequence[int], crcs: Sequence[int], mtimes: Sequence[int], pack_checksum: bytes
) -> bytes:
    """`index_bytes` for rows given as columns, in any order (see `index_parts`)."""
    return b"".join(index_parts(ids, offsets, crcs, mtimes, pack_checksum))


def index_parts(
    ids: Sequence[bytes], offsets: Sequence[int], crcs: Sequence[int], mtimes: Sequence[int], pack_checksum: bytes
) -> list[bytes]:
    """The .idx as the pieces a writer writes one after another (its own checksum last), so a large
    index is never held twice. Rows that come as a few sorted runs (gc's copied packs) sort in
    near-linear time, and no tuple per row is built."""
    import bisect

    order = sorted(range(len(ids)), key=ids.__getitem__)
    joined = b"".join(map(ids.__getitem__, order))
    firsts = joined[::32]  # sorted: each bucket of the fan-out ends where the next first byte starts
    fanout = [bisect.bisect_right(firsts, i) for i in range(256)]
    n = len(ids)
    parts = [IDX_HEADER.pack(IDX_MAGIC, VERSION, n), struct.pack(">256I", *fanout), joined]
    parts.append(struct.pack(f">{n}Q", *map(offsets.__getitem__, order)))
    parts.append(struct.pack(f">{n}I", *map(crcs.__getitem__, order)))
    parts.append(struct.pack(f">{n}Q", *map(mtimes.__getitem__, order)))
    parts.append(pack_checksum)
    hasher = blake3.blake3()
    for part in parts:
        hasher.update(part)
    parts.append(hasher.digest())
    return parts


def pack_damage(path: Path, what: str) -> StorageError:
    """E007 naming the pack or index file."""
    return StorageError(f"{path.name}: {what}", path=str(path))


ID_RUN = 256
_IDS = struct.Struct("32s" * ID_RUN)
"""Splits runs of ids laid end to end into bytes objects, ID_RUN per C call (a slice per id costs twice
as much)."""


class PackIndex:
    """A memory-mapped .idx: binary search over the sorted ids, bounded by the fan-out table."""

    def __init__(self, path: Path) -> None:
        self.path = path
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size < IDX_HEADER.size + FANOUT + 2 * TRAILER:
                raise pack_damage(path, "index is truncated")
            self.map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        magic, version, count = IDX_HEADER.unpack_from(self.map, 0)
        if magic != IDX_MAGIC or version != VERSION:
            self.close()
            raise pack_damage(path, "not a reel pack index (bad magic or version)")
        if size != IDX_HEADER.size + FANOUT + count * ROW + 2 * TRAILER:
            self.close()
            raise pack_damage(path, f"index size {size} does not fit its count {count}")
        self.count = count
        self.fanout = struct.unpack_from(">256I", self.map, IDX_HEADER.size)
        if self.fanout[255] != count or sorted(self.fanout) != list(self.fanout):  # non-decreasing (in C)
            self.close()
            raise pack_damage(path, "index fan-out table is inconsistent")
        self._ids = IDX_HEADER.size + FANOUT
        self._offsets = self._ids + 32 * count
        self._crcs = self._offsets + 8 * count
        self._mtimes = self._crcs + 4 * count
        self.pack_checksum = bytes(self.map[self._mtimes + 8 * count : self._mtimes + 8 * count + TRAILER])

    def close(self) -> None:
        self.map.close()

    def id(self, i: int) -> Hash:
        at = self._ids + 32 * i
        return Hash(self.map[at : at + 32])

    def find(self, h: bytes) -> int:
        """Position of `h` in the index, or -1. Binary search narrows the id's fan-out bucket to a run of
        at most SCAN_RUN ids, which one C-level search of the mapped bytes finishes (a match must start
        on an id boundary: one that straddles two ids is skipped)."""
        if len(h) != 32:
            return -1
        first = h[0]
        lo = self.fanout[first - 1] if first else 0
        hi = self.fanout[first]
        m, base = self.map, self._ids
        while hi - lo > SCAN_RUN:
            mid = (lo + hi) // 2
            at = base + 32 * mid
            here = m[at : at + 32]
            if here < h:
                lo = mid + 1
            elif here > h:
                hi = mid
            else:
                return int(mid)
        end = base + 32 * hi
        at = m.find(h, base + 32 * lo, end)
        while at >= 0 and (at - base) % 32:
            at = m.find(h, at + 1, end)
        return -1 if at < 0 else int((at - base) // 32)

    def hex_positions(self) -> dict[bytes, int]:
        """Lowercase hex id (ASCII) -> position for every entry: built once by a reader with many names
        to look up, which probes it with each name as given (so a name is never parsed)."""
        if not self.count:
            return {}
        from binascii import hexlify

        start = self._ids
        hexed = hexlify(self.map[start : start + 32 * self.count], b"\n", 32)
        return dict(zip(hexed.split(b"\n"), range(self.count)))

    def offsets_and_crcs(self) -> tuple[array.array[int], array.array[int]]:
        """Every entry's offset and CRC-32, in index order, each column read in one go."""
        return self._column("Q", self._offsets), self._column("I", self._crcs)

    def entry(self, i: int) -> tuple[int, int]:
        """(offset, CRC-32) of entry `i`."""
        return _U64(self.map, self._offsets + 8 * i)[0], _U32(self.map, self._crcs + 4 * i)[0]

    def offset(self, i: int) -> int:
        value: int = struct.unpack_from(">Q", self.map, self._offsets + 8 * i)[0]
        return value

    def crc(self, i: int) -> int:
        value: int = struct.unpack_from(">I", self.map, self._crcs + 4 * i)[0]
        return value

    def mtime(self, i: int) -> int:
        value: int = struct.unpack_from(">Q", self.map, self._mtimes + 8 * i)[0]
        return value

    def ids(self) -> Iterator[Hash]:
        m, base = self.map, self._ids
        for i in range(self.count):
            yield Hash(m[base + 32 * i : base + 32 * i + 32])

    def columns(self) -> Columns:
        """Every id, offset, CRC and mtime, in index order, each column read in one go (gc lists whole
        packs: one call per field per entry would cost more than the rest of its listing); the numbers
        as compact arrays, and the mapped pages let go afterwards."""
        m, n, base = self.map, self.count, self._ids
        whole = n - n % ID_RUN
        with memoryview(m) as view:
            ids = list(itertools.chain.from_iterable(_IDS.iter_unpack(view[base : base + 32 * whole])))
        ids += struct.unpack_from("32s" * (n - whole), m, base + 32 * whole)
        offsets, crcs, mtimes = (
            self._column("Q", self._offsets),
            self._column("I", self._crcs),
            self._column("Q", self._mtimes),
        )
        self.release()
        return ids, offsets, crcs, mtimes

    def _column(self, code: str, at: int) -> array.array[int]:
        import array

        column = array.array(code)
        column.frombytes(self.map[at : at + column.itemsize * self.count])
        if sys.byteorder == "little":
            column.byteswap()
        return column

    def release(self) -> None:
        """Let go of the index's mapped pages (a whole-index read would otherwise stay resident)."""
        self.map.madvise(mmap.MADV_DONTNEED)

    def checksum_ok(self) -> bool:
        end = len(self.map) - TRAILER
        with memoryview(self.map) as view:
            ok = blake3.blake3(view[:end]).digest() == self.map[end:]
        self.release()
        return ok
