"""A received git pack's sizes, checked before anything inflates it.

dulwich and git inflate each entry whole before we see it, so a remote could make a fetch allocate a
gigabyte for one zero-filled blob that compresses to a megabyte. This pass reads every entry's
header (the declared size; for a delta, the size of the object it produces, read from the first
bytes of the delta), refuses any over the limit, and inflates each entry only into a small
rolling buffer to find where the next begins, checking it inflates to exactly what it declared.

The same pass can read the pack for good (`keep`): a pack without deltas, which is what a reel push
sends, is then inflated once in all, each whole object handed over as it ends, and the pack's SHA-1
trailer checked on the way.
"""

from __future__ import annotations

import hashlib
import struct
import zlib
from collections.abc import Callable
from typing import IO
from zlib import decompressobj

from reelstore.backend.packs.pack import read_varint
from reelstore.errors import StorageError

_HEADER = struct.Struct(">4sII")
_OFS_DELTA, _REF_DELTA = 6, 7
_KINDS = (1, 2, 3, 4, _OFS_DELTA, _REF_DELTA)
_READ = 1 << 16
_STEP = 1 << 20
_FIRST = 64
_LONGEST_SIZE = 11
"""The most bytes an entry's type and size can take before the size counts as malformed (4 + 10 * 7 bits)."""
"""Bytes of compressed input given to an entry's inflater first, beyond its declared size: most entries
end inside that, and zlib copies whatever input follows the end of a stream."""


class _Reader:
    """Sequential reads from the spooled pack through a buffer; `pos` is the pack offset."""

    def __init__(self, stream: IO[bytes], start: int, end: int, digest: hashlib._Hash | None = None) -> None:
        self.stream, self.end, self.digest = stream, end, digest
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

    def take(self, n: int) -> bytes:
        """Up to `n` bytes from the buffer (refilled if empty)."""
        if self.i >= len(self.buf):
            self._fill()
        out = self.buf[self.i : self.i + n]
        self.i += len(out)
        self.pos += len(out)
        return out

    def back(self, n: int) -> None:
        """Give back the last `n` bytes taken (a zlib stream ended before them: they begin the next
        entry). They are always in the buffer: a stream's unused input is part of the last piece taken."""
        self.i -= n
        self.pos -= n

    def _fill(self) -> None:
        left = self.end - self.pos
        self.buf = self.stream.read(min(_READ, left)) if left > 0 else b""
        self.i = 0
        if not self.buf:
            raise StorageError("the remote sent a truncated pack")
        if self.digest is not None:
            self.digest.update(self.buf)


def check_sizes(stream: IO[bytes], size: int, limit: int, keep: Callable[[int, bytes], None] | None = None) -> bool:
    """Raise StorageError unless every entry of the pack in `stream` (of `size` bytes, trailer
    included) declares, and inflates to, at most `limit` bytes, deltas' results included. True if the
    pack has deltas.

    With `keep`, the trailer is checked too and every entry that is not a delta goes to `keep` (git
    type number, inflated bytes) as soon as it is read; on a pack with deltas the caller must read it
    again another way (deltas are only checked here)."""
    if size == 0:
        return False
    stream.seek(0)
    head = stream.read(_HEADER.size)
    if len(head) < _HEADER.size:
        raise StorageError("the remote sent a truncated pack")
    magic, version, count = _HEADER.unpack(head)
    if magic != b"PACK" or version not in (2, 3):
        raise StorageError("the remote sent something that is not a git pack")
    digest = hashlib.sha1(head) if keep is not None else None
    reader = _Reader(stream, _HEADER.size, size - 20, digest)
    deltas = False
    for _ in range(count):
        at = reader.pos
        buf, i = reader.buf, reader.i
        if i + _LONGEST_SIZE <= len(buf):  # the type and size are in the buffer: read them in place
            c = buf[i]
            kind, declared, shift, i = (c >> 4) & 7, c & 0x0F, 4, i + 1
            while c & 0x80 and shift <= 70:
                c = buf[i]
                declared |= (c & 0x7F) << shift
                shift, i = shift + 7, i + 1
            reader.pos += i - reader.i
            reader.i = i
        else:
            c = reader.byte()
            kind, declared, shift = (c >> 4) & 7, c & 0x0F, 4
            while c & 0x80 and shift <= 70:
                c = reader.byte()
                declared |= (c & 0x7F) << shift
                shift += 7
        if shift > 70:
            raise StorageError(f"the remote sent a pack entry at {at} with a malformed size")
        if kind not in _KINDS:
            raise StorageError(f"the remote sent a pack entry at {at} of unknown type {kind}")
        delta = kind >= _OFS_DELTA
        if delta:
            deltas = True
            if kind == _OFS_DELTA:
                while reader.byte() & 0x80:
                    pass
            else:
                reader.skip(20)
        if declared > (2 * limit if delta else limit):
            raise StorageError(f"the remote sent an object of {declared} bytes (limit {limit}); nothing was stored")
        if keep is not None and not delta:
            # Most entries lie in the buffer with the bytes given to zlib first: inflated right there. Any
            # other (or one that does not end, or not at its size, in that piece) is read by `_inflate`
            # from where it begins, which names what is wrong.
            buf, i, given = reader.buf, reader.i, declared + (declared >> 8) + _FIRST
            if i + given <= len(buf):
                z = decompressobj()
                try:
                    data = z.decompress(buf[i : i + given], _STEP)
                except zlib.error:
                    data = b""
                if z.eof and len(data) == declared:
                    used = given - len(z.unused_data)
                    reader.i += used
                    reader.pos += used
                    keep(kind, data)
                    continue
            keep(kind, _inflate(reader, declared, None, at, True))
        else:
            _inflate(reader, declared, limit if delta else None, at, False)
    if digest is not None:
        if reader.i < len(reader.buf) or reader.pos != size - 20:
            raise StorageError("the remote sent a pack with bytes after its last entry")
        stream.seek(size - 20)
        if stream.read(20) != digest.digest():
            raise StorageError("the remote sent a damaged pack: its checksum does not match")
    stream.seek(0)
    return deltas


def _inflate(reader: _Reader, declared: int, result_limit: int | None, at: int, whole: bool) -> bytes:
    """Inflate one entry, checking its size (and, for a delta, its result's size); its bytes if `whole`,
    else b"" (only a rolling piece of it is ever held)."""
    z = zlib.decompressobj()
    try:
        out = z.decompress(reader.take(declared + (declared >> 8) + _FIRST), _STEP)
    except zlib.error as exc:
        raise StorageError(f"the remote sent a damaged pack entry at {at}: {exc}") from None
    if z.eof and len(out) == declared and result_limit is None:  # most entries: whole in the first piece
        reader.back(len(z.unused_data))
        return out if whole else b""
    total = 0
    first = b""
    pieces: list[bytes] = []
    while True:
        total += len(out)
        if total > declared:
            raise StorageError(f"pack entry at {at} inflates past its declared {declared} bytes")
        if whole:
            pieces.append(out)
        if result_limit is not None and len(first) < 20:
            first += out[: 20 - len(first)]
        if z.eof:
            reader.back(len(z.unused_data))
            break
        try:
            out = z.decompress(z.unconsumed_tail or reader.take(_READ), _STEP)
        except zlib.error as exc:
            raise StorageError(f"the remote sent a damaged pack entry at {at}: {exc}") from None
    if total != declared:
        raise StorageError(f"pack entry at {at} inflates to {total} bytes, not the declared {declared}")
    if result_limit is not None:
        try:
            _, pos = read_varint(first, 0, len(first))
            result, _ = read_varint(first, pos, len(first))
        except ValueError:
            raise StorageError("the remote sent a delta with a malformed header") from None
        if result > result_limit:
            raise StorageError(
                f"the remote sent a delta producing {result} bytes (limit {result_limit}); nothing was stored"
            )
    return pieces[0] if len(pieces) == 1 else b"".join(pieces)
