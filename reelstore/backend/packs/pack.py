"""Packfiles: many objects in one file, compressed against each other, found through a sorted index.

A pack holds each object's body zstd-compressed in one of three ways: alone, with a dictionary trained
on this pack's small objects (stored once in the pack header), or with an earlier entry of the same pack
as a raw-content prefix (a delta in all but name, with a bounded chain depth). The index is a fan-out
table, the sorted ids, offsets, a CRC32 per entry and each object's mtime, so the gc grace period
survives packing. Nothing read from a pack is believed before it is re-hashed. The byte layout is
documented in docs/format.md ("Packs and pack indexes").
"""

from __future__ import annotations

import mmap
import os
import struct
import zlib
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path

import blake3
import zstandard

from reelstore.backend.packs.pack_index import TRAILER, VERSION, PackIndex, pack_damage
from reelstore.codec import MAX_OBJECT_SIZE
from reelstore.errors import StorageError
from reelstore.objects import Hash

PACK_MAGIC = b"RPAK"
PACK_HEADER = struct.Struct(">4sIII")
MAX_DICT = 1 << 20
MAX_CHAIN = 64
MAX_WINDOW = 1 << 27
"""Largest zstd window a reader accepts (bytes); the writer's levels stay far below it."""
RELEASE_AT = 64 << 10
"""Mapped ranges at least this large have their pages released once read."""
HASH_PIECE = 8 << 20

KIND_CODES = {
    "blob": 1,
    "tree": 2,
    "delta": 3,
    "capability": 4,
    "effect": 5,
    "effects": 6,
    "view": 7,
    "record": 8,
    "journal": 9,
    "finding": 10,
    "chunks": 11,
    "opevent": 12,
    "recording": 13,
    "approval": 14,
}
KIND_NAMES = {code: kind for kind, code in KIND_CODES.items()}
KIND_TAGS = {code: kind.encode("ascii") + b"\0" for kind, code in KIND_CODES.items()}
"""Each kind's canonical prefix, `kind\0`."""

STORED, ZSTD, DICT, BASE = 0, 1, 2, 3
METHOD_NAMES = {STORED: "stored", ZSTD: "zstd", DICT: "dict", BASE: "base"}

_FORMAT = zstandard.FORMAT_ZSTD1_MAGICLESS
_FLAGS = {"format": _FORMAT, "write_content_size": False, "write_checksum": False, "write_dict_id": False}


def split_raw(raw: bytes) -> tuple[int, bytes]:
    """(kind code, body) of canonical bytes `kind\\0body`."""
    nul = raw.index(b"\0")
    return KIND_CODES[raw[:nul].decode("ascii")], raw[nul + 1 :]


def join_raw(code: int, body: bytes) -> bytes:
    return KIND_TAGS[code] + body


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def read_varint(buf: mmap.mmap | bytes, pos: int, end: int) -> tuple[int, int]:
    """A little-endian base-128 number at `pos` (reel pack headers, git delta headers): (value, next
    position); ValueError if it runs to `end` or past 64 bits."""
    value = shift = 0
    while True:
        if pos >= end or shift > 63:
            raise ValueError("varint runs past the entry")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, pos


def release(buf: mmap.mmap | bytes, start: int, end: int) -> None:
    """Let go of the mapped pages of `buf[start:end]` once they are read: a file mapping's pages
    count as resident until the kernel evicts them, so without this, reading a large pack through
    a map would look (and be accounted) like holding all of it in memory."""
    if not isinstance(buf, mmap.mmap) or end - start < RELEASE_AT:
        return
    lo = start - start % mmap.PAGESIZE
    hi = min(end, len(buf))
    if hi > lo:
        buf.madvise(mmap.MADV_DONTNEED, lo, hi - lo)


def hash_mapped(buf: mmap.mmap | bytes, end: int) -> bytes:
    """BLAKE3 of `buf[:end]`, a piece at a time, releasing each piece's pages as it goes."""
    hasher = blake3.blake3()
    with memoryview(buf) as view:
        for at in range(0, end, HASH_PIECE):
            hasher.update(view[at : min(end, at + HASH_PIECE)])
            release(buf, at, min(end, at + HASH_PIECE))
    return hasher.digest()


# Reading


class _Parsed:
    __slots__ = ("code", "method", "size", "base", "start", "end", "header")

    def __init__(self, code: int, method: int, size: int, base: int | None, start: int, end: int, header: int):
        self.code, self.method, self.size, self.base = code, method, size, base
        self.start, self.end, self.header = start, end, header


class Pack:
    """An open pack and its index. Opening checks structure, not content: a truncated pack or one whose
    trailer does not match its index is refused whole; a damaged entry fails alone, on read."""

    CACHE_BYTES = 32 << 20

    def __init__(self, pack_path: Path, idx_path: Path | None = None) -> None:
        self.path = pack_path
        self.name = pack_path.stem
        idx_path = idx_path or pack_path.with_suffix(".idx")
        if not idx_path.is_file():
            raise pack_damage(pack_path, "pack has no index")
        self.index = PackIndex(idx_path)
        try:
            with open(pack_path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                if size < PACK_HEADER.size + TRAILER:
                    raise pack_damage(pack_path, "pack is truncated")
                self.map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except BaseException:
            self.index.close()
            raise
        try:
            magic, version, count, dict_len = PACK_HEADER.unpack_from(self.map, 0)
            if magic != PACK_MAGIC or version != VERSION:
                raise pack_damage(pack_path, "not a reel pack (bad magic or version)")
            if count != self.index.count:
                from reelstore.wording import plural  # for the message alone: a sound pack never needs it

                raise pack_damage(pack_path, f"pack holds {plural(count, 'entry')} but its index {self.index.count}")
            if self.map[size - TRAILER :] != self.index.pack_checksum:
                raise pack_damage(pack_path, "pack trailer does not match its index (truncated or replaced)")
            if dict_len > MAX_DICT or PACK_HEADER.size + dict_len > size - TRAILER:
                raise pack_damage(pack_path, "pack dictionary length is out of bounds")
        except BaseException:
            self.close()
            raise
        self.count = count
        self.size = size
        self.data_start = PACK_HEADER.size + dict_len
        self.data_end = size - TRAILER
        self._dict_bytes = bytes(self.map[PACK_HEADER.size : self.data_start])
        self._plain = zstandard.ZstdDecompressor(format=_FORMAT, max_window_size=MAX_WINDOW)
        self._dict: zstandard.ZstdDecompressor | None = None
        self._cache: OrderedDict[int, tuple[bytes, int]] = OrderedDict()
        """offset -> (resolved body, its base chain depth), so a chain is measured whole even when its
        bases are cached: a pack read in order (index-pack, verify-pack, fsck) sees every chain's depth."""
        self._cached = 0

    def close(self) -> None:
        self.map.close()
        self.index.close()

    def __contains__(self, h: object) -> bool:
        return isinstance(h, bytes) and len(h) == 32 and self.index.find(h) >= 0

    def __len__(self) -> int:
        return int(self.count)

    def _parse(self, offset: int) -> _Parsed:
        m, end = self.map, self.data_end
        if not self.data_start <= offset < end - 2:
            raise ValueError(f"offset {offset} is outside the pack's entries")
        code, method, size, more = m[offset], m[offset + 1], m[offset + 2], m[offset + 3]
        if code not in KIND_NAMES or method not in METHOD_NAMES:
            raise ValueError(f"unknown kind {code} or method {method}")
        # Sizes below 2**14 (most objects) take one or two bytes, read inline; longer ones loop.
        if not size & 0x80:
            pos = offset + 3
        elif not more & 0x80 and offset + 3 < end:
            size, pos = (size & 0x7F) | more << 7, offset + 4
        else:
            size, pos = read_varint(m, offset + 2, end)
        if size > MAX_OBJECT_SIZE:
            raise ValueError(f"declared size {size} exceeds the object limit")
        base = None
        if method == BASE:
            dist, pos = read_varint(m, pos, end)
            if dist == 0 or dist > offset - self.data_start:
                raise ValueError(f"base distance {dist} points outside the pack")
            base = offset - dist
        length, more = (m[pos], m[pos + 1]) if pos + 1 < end else (0x80, 0x80)
        if not length & 0x80:
            pos += 1
        elif not more & 0x80:
            length, pos = (length & 0x7F) | more << 7, pos + 2
        else:
            length, pos = read_varint(m, pos, end)
        if pos + length > end:
            raise ValueError("entry runs past the end of the pack")
        return _Parsed(code, method, size, base, pos, pos + length, pos - offset)

    def _inflate(self, p: _Parsed, base_body: bytes | None) -> bytes:
        data = self.map[p.start : p.end]
        if p.end - p.start >= RELEASE_AT:
            release(self.map, p.start, p.end)
        if p.method != STORED and (not data or data[0] & 0xE0):
            # A frame that declares its content size would make the decoder allocate that size up
            # front, whatever the entry says; our writer never emits one, so it is damage.
            raise ValueError("zstd frame declares a content size (or is empty)")
        if p.method == STORED:
            body = data
        elif p.method == ZSTD:
            body = self._plain.decompress(data, max_output_size=p.size, allow_extra_data=False)
        elif p.method == DICT:
            if not self._dict_bytes:
                raise ValueError("entry uses the pack dictionary but the pack has none")
            if self._dict is None:
                zdict = zstandard.ZstdCompressionDict(self._dict_bytes, dict_type=zstandard.DICT_TYPE_FULLDICT)
                self._dict = zstandard.ZstdDecompressor(dict_data=zdict, format=_FORMAT, max_window_size=MAX_WINDOW)
            body = self._dict.decompress(data, max_output_size=p.size, allow_extra_data=False)
        else:
            zdict = zstandard.ZstdCompressionDict(base_body or b"", dict_type=zstandard.DICT_TYPE_RAWCONTENT)
            dec = zstandard.ZstdDecompressor(dict_data=zdict, format=_FORMAT, max_window_size=MAX_WINDOW)
            body = dec.decompress(data, max_output_size=p.size, allow_extra_data=False)
        if len(body) != p.size:
            raise ValueError(f"entry inflates to {len(body)} bytes, not the declared {p.size}")
        return body

    def _remember(self, offset: int, body: bytes, depth: int) -> None:
        if len(body) > self.CACHE_BYTES:
            return
        self._cache[offset] = (body, depth)
        self._cached += len(body)
        while self._cached > self.CACHE_BYTES and self._cache:
            _, (old, _) = self._cache.popitem(last=False)
            self._cached -= len(old)

    def body_at(self, offset: int, parsed: _Parsed | None = None) -> tuple[int, bytes]:
        """(kind code, body) of the entry at `offset`, resolving its base chain (ValueError on damage)."""
        code, body, _ = self.resolve(offset, parsed)
        return code, body

    def resolve(self, offset: int, parsed: _Parsed | None = None) -> tuple[int, bytes, int]:
        """`body_at`, and the entry's chain depth (1 for an entry with no base)."""
        if parsed is not None and parsed.method != BASE:
            try:
                return parsed.code, self._inflate(parsed, None), 1
            except zstandard.ZstdError as exc:
                raise ValueError(f"entry at offset {offset} does not inflate: {exc}") from None
        chain: list[tuple[int, _Parsed]] = []
        at: int | None = offset
        base_body: bytes | None = None
        below = 0
        while at is not None:
            hit = self._cache.get(at)
            if hit is not None:
                self._cache.move_to_end(at)
                base_body, below = hit
                break
            p = parsed if parsed is not None and at == offset else self._parse(at)
            chain.append((at, p))
            if len(chain) + below > MAX_CHAIN:
                raise ValueError(f"base chain longer than {MAX_CHAIN}")
            at = p.base
        if len(chain) + below > MAX_CHAIN:
            raise ValueError(f"entry at offset {offset}: base chain longer than {MAX_CHAIN}")
        for depth, (pos, p) in enumerate(reversed(chain), start=below + 1):
            try:
                base_body = self._inflate(p, base_body)
            except zstandard.ZstdError as exc:
                raise ValueError(f"entry at offset {pos} does not inflate: {exc}") from None
            if pos != offset:
                self._remember(pos, base_body, depth)
        code = chain[0][1].code if chain else self._parse(offset).code
        return code, base_body if base_body is not None else b"", len(chain) + below

    def get_raw(self, h: Hash, i: int | None = None) -> bytes:
        """Verified canonical bytes of `h` (E007 if its entry is damaged; KeyError if absent)."""
        i = self.index.find(h) if i is None else i
        if i < 0:
            raise KeyError(h)
        return self.read(h, i)[1]

    def read(self, h: bytes, i: int) -> tuple[int, bytes]:
        """(kind code, verified canonical bytes) of entry `i`, which the index lists as `h`: the entry's
        CRC is checked, its body inflated once and the canonical bytes hashed once (E007 on damage)."""
        offset, crc = self.index.entry(i)
        try:
            p = self._parse(offset)
            if zlib.crc32(self.map[offset : p.end]) != crc:
                raise ValueError("entry checksum mismatch")
            if p.method == BASE:
                code, body = self.body_at(offset, p)
            else:
                code, body = p.code, self._inflate(p, None)
        except ValueError as exc:
            raise StorageError(f"object {h.hex()} in {self.name} is damaged: {exc}", id=Hash(h)) from None
        except zstandard.ZstdError as exc:
            raise StorageError(
                f"object {h.hex()} in {self.name} is damaged: entry at offset {offset} does not inflate: {exc}",
                id=Hash(h),
            ) from None
        raw = KIND_TAGS[code] + body
        if blake3.blake3(raw).digest() != h:
            raise StorageError(
                f"object {h.hex()} in {self.name} is damaged: content does not hash to its id", id=Hash(h)
            )
        return code, raw

    def mtime(self, h: Hash) -> int | None:
        i = self.index.find(h)
        return None if i < 0 else self.index.mtime(i)

    def ids(self) -> Iterator[Hash]:
        return self.index.ids()

    def entries(self) -> Iterator[tuple[Hash, int, int]]:
        """(id, offset, mtime) for every entry, in index order."""
        idx = self.index
        for i in range(idx.count):
            yield idx.id(i), idx.offset(i), idx.mtime(i)

    def release_pages(self, start: int | None = None, end: int | None = None) -> None:
        """Let go of the mapped pages of `start`..`end` (all entries by default) once read (see `release`)."""
        release(self.map, self.data_start if start is None else start, self.data_end if end is None else end)

    def checksums_ok(self) -> bool:
        """Whether the pack's bytes hash to its trailer and the index's to its own: what makes the
        pack's entries safe to copy as they are (each entry's CRC is still checked as it is copied)."""
        return hash_mapped(self.map, self.data_end) == self.map[self.data_end :] and self.index.checksum_ok()

    def parse_entry(self, offset: int) -> _Parsed:
        """The header of the entry at `offset` (ValueError if malformed), for a walk of every entry."""
        return self._parse(offset)


class PackScan:
    """A pack with no index (for index-pack and unpack-objects), read one entry at a time.

    Opening checks the header and the trailer checksum. Iterating inflates each entry (within its
    declared size, itself within the object limit), re-hashes it and yields (id, offset, crc, raw),
    so memory stays at one entry plus the base cache, whatever the pack holds or claims. Damage
    anywhere raises StorageError; a caller that must store all or nothing iterates twice."""

    def __init__(self, data: bytes | mmap.mmap) -> None:
        size = len(data)
        if size < PACK_HEADER.size + TRAILER:
            raise StorageError("pack is truncated")
        magic, version, count, dict_len = PACK_HEADER.unpack_from(data, 0)
        if magic != PACK_MAGIC or version != VERSION:
            raise StorageError("not a reel pack (bad magic or version)")
        if hash_mapped(data, size - TRAILER) != data[size - TRAILER :]:
            raise StorageError("pack checksum mismatch (truncated or damaged)")
        self.data = data
        self.count = count
        self.trailer = bytes(data[size - TRAILER :])
        self._dict_len = dict_len

    def __iter__(self) -> Iterator[tuple[Hash, int, int, bytes]]:
        data, size = self.data, len(self.data)
        view = _Scanner(data, size, self._dict_len)
        offset = view.data_start
        for _ in range(self.count):
            try:
                p = view._parse(offset)
                code, body, depth = view.resolve(offset)
            except ValueError as exc:
                raise StorageError(f"pack entry at offset {offset} is damaged: {exc}") from None
            raw = join_raw(code, body)
            crc = zlib.crc32(data[offset : p.end])
            release(data, offset, p.end)
            view._remember(offset, body, depth)
            del body
            yield Hash.of(raw), offset, crc, raw
            offset = p.end
        if offset != size - TRAILER:
            from reelstore.wording import plural

            raise StorageError(
                f"pack declares {plural(self.count, 'entry')} but they end at {offset}, not {size - TRAILER}"
            )


def scan_pack(data: bytes | mmap.mmap) -> PackScan:
    """`PackScan(data)`: an index-less pack, checked whole, then read entry by entry."""
    return PackScan(data)


class _Scanner(Pack):
    """A Pack over bytes in memory with no index: only the entry parsing and inflation are used."""

    def __init__(self, data: bytes | mmap.mmap, size: int, dict_len: int) -> None:
        if dict_len > MAX_DICT or PACK_HEADER.size + dict_len > size - TRAILER:
            raise StorageError("pack dictionary length is out of bounds")
        self.map = data  # type: ignore[assignment]
        self.name = "<stream>"
        self.data_start = PACK_HEADER.size + dict_len
        self.data_end = size - TRAILER
        self._dict_bytes = bytes(data[PACK_HEADER.size : self.data_start])
        self._plain = zstandard.ZstdDecompressor(format=_FORMAT, max_window_size=MAX_WINDOW)
        self._dict = None
        self._cache = OrderedDict()
        self._cached = 0
