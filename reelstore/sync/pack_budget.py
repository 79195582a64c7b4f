"""A received git pack's sizes, checked before anything inflates it.

dulwich inflates each entry whole before we see it, so a remote could make a fetch allocate a
gigabyte for one zero-filled blob that compresses to a megabyte. This pass reads every entry's
header (the declared size; for a delta, the size of the object it produces, read from the first
bytes of the delta), refuses any over the limit, and inflates each entry only into a small
rolling buffer to find where the next begins, checking it inflates to exactly what it declared.
"""

from __future__ import annotations

import struct
import zlib
from typing import IO

from reelstore.errors import StorageError

_HEADER = struct.Struct(">4sII")
_OFS_DELTA, _REF_DELTA = 6, 7
_READ = 1 << 16
_STEP = 1 << 20


class _Reader:
    """Sequential reads from the spooled pack through a small buffer; `pos` is the pack offset."""

    def __init__(self, stream: IO[bytes], start: int, end: int) -> None:
        self.stream, self.end = stream, end
        self.buf = b""
        self.i = 0
        self.pos = start

    def byte(self) -> int:
        if self.i >= len(self.buf):
            self._fill()
        b = self.buf[self.i]
        self.i += 1
        self.pos += 1
        return b

    def skip(self, n: int) -> None:
        for _ in range(n):
            self.byte()

    def chunk(self) -> bytes:
        """The rest of the buffer (refilled if empty)."""
        if self.i >= len(self.buf):
            self._fill()
        out = self.buf[self.i :]
        self.pos += len(out)
        self.buf, self.i = b"", 0
        return out

    def unread(self, data: bytes) -> None:
        """Give back the bytes a zlib stream did not use: they begin the next entry."""
        self.buf, self.i = data, 0
        self.pos -= len(data)

    def _fill(self) -> None:
        left = self.end - self.pos
        self.buf = self.stream.read(min(_READ, left)) if left > 0 else b""
        self.i = 0
        if not self.buf:
            raise StorageError("the remote sent a truncated pack")


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= len(data) or shift > 63:
            raise StorageError("the remote sent a delta with a malformed header")
        b = data[at]
        at += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, at


def check_sizes(stream: IO[bytes], size: int, limit: int) -> None:
    """Raise StorageError unless every entry of the pack in `stream` (of `size` bytes, trailer
    included) declares, and inflates to, at most `limit` bytes, deltas' results included."""
    if size == 0:
        return
    stream.seek(0)
    head = stream.read(_HEADER.size)
    if len(head) < _HEADER.size:
        raise StorageError("the remote sent a truncated pack")
    magic, version, count = _HEADER.unpack(head)
    if magic != b"PACK" or version not in (2, 3):
        raise StorageError("the remote sent something that is not a git pack")
    reader = _Reader(stream, _HEADER.size, size - 20)
    for _ in range(count):
        at = reader.pos
        c = reader.byte()
        kind, declared, shift = (c >> 4) & 7, c & 0x0F, 4
        while c & 0x80:
            c = reader.byte()
            declared |= (c & 0x7F) << shift
            shift += 7
            if shift > 70:
                raise StorageError(f"the remote sent a pack entry at {at} with a malformed size")
        if kind == _OFS_DELTA:
            while reader.byte() & 0x80:
                pass
        elif kind == _REF_DELTA:
            reader.skip(20)
        delta = kind in (_OFS_DELTA, _REF_DELTA)
        if declared > (2 * limit if delta else limit):
            raise StorageError(f"the remote sent an object of {declared} bytes (limit {limit}); nothing was stored")
        _inflate(reader, declared, limit if delta else None, at)


def _inflate(reader: _Reader, declared: int, result_limit: int | None, at: int) -> None:
    """Inflate one entry into nothing, checking its size (and, for a delta, its result's size)."""
    z = zlib.decompressobj()
    total = 0
    first = b""
    data = reader.chunk()
    while True:
        try:
            out = z.decompress(data, _STEP)
        except zlib.error as exc:
            raise StorageError(f"the remote sent a damaged pack entry at {at}: {exc}") from None
        total += len(out)
        if total > declared:
            raise StorageError(f"pack entry at {at} inflates past its declared {declared} bytes")
        if result_limit is not None and len(first) < 20:
            first += out[: 20 - len(first)]
        if z.eof:
            reader.unread(z.unused_data)
            break
        data = z.unconsumed_tail or reader.chunk()
    if total != declared:
        raise StorageError(f"pack entry at {at} inflates to {total} bytes, not the declared {declared}")
    if result_limit is not None:
        _, pos = _varint(first, 0)
        result, _ = _varint(first, pos)
        if result > result_limit:
            raise StorageError(f"the remote sent a delta producing {result} bytes (limit {result_limit}); "
                               "nothing was stored")
