"""The pack a push sends, built in one pass as the push's walk finds each new object.

Each reel object is read from the store once (verified there), named once (one SHA-1 for its git
blob id) and deflated once into a spooled file: a push of any size holds the entries' ids and
offsets, not their bytes. Content the probe finds incompressible (zstd cannot shrink a sample of it)
is stored in deflate's "stored" blocks, which costs a copy instead of a full deflate per object
(deflate's set-up alone costs more than the copy for the small objects that make up most stores).

The fan-out trees, the `refs` file and the commit (see `mapping`) are written after the blobs, from
the names collected on the way. The finished entries go out as they lie, in large writes: the whole
pack by `write_to` (our own send-pack, `send_pack`), or an entry per record through dulwich's
send-pack (`records`, for HTTP and the in-process server), so nothing is re-encoded, re-hashed or
re-deflated on the way.
"""

from __future__ import annotations

import bisect
import hashlib
import struct
import time
import zlib
from binascii import hexlify
from collections.abc import Callable, Iterator
from typing import IO, TYPE_CHECKING

import zstandard

from reelstore.objects import HASH_SIZE, Hash
from reelstore.sync.mapping import IDENTITY
from reelstore.sync.state import format_refs
from reelstore.wording import plural

if TYPE_CHECKING:
    from dulwich.pack import UnpackedObject

_COMMIT, _TREE, _BLOB = 1, 2, 3
_TYPE_NAMES = {_COMMIT: b"commit ", _TREE: b"tree ", _BLOB: b"blob "}
_SPOOL = 16 << 20
_READ = 1 << 20
_SAMPLE = 8192
_PROBE = zstandard.ZstdCompressor(level=-1)
"""zstd's fast mode (level -1) shrinks a namespace node (1.4 KB, mostly ids) exactly as much as level 1
does, and text within a few per cent, in a third of the time (measured on a push's nodes)."""
_ZLIB_HEADER = b"\x78\x01"
_STORED_MAX = 0xFFFF
_STORED_HEAD = struct.Struct("<BHH")
_ADLER = struct.Struct(">I")
_PACK_HEADER = struct.Struct(">4sII")
_SMALL_STORED = struct.Struct("<BBBBBHH")
"""A blob entry of 16 to 2047 bytes in one stored block: its two-byte pack header (type 3), the zlib
header, then the block's head (final, length, its complement)."""
_sha1 = hashlib.sha1


def entry_header(kind: int, size: int) -> bytes:
    """A pack entry's type-and-size header (git's little-endian base-128, type in the first byte)."""
    if size < 0x10:
        return bytes(((kind << 4) | size,))
    if size < 0x800:
        return bytes(((kind << 4) | (size & 0x0F) | 0x80, size >> 4))
    out = bytearray()
    byte = (kind << 4) | (size & 0x0F)
    size >>= 4
    while size:
        out.append(byte | 0x80)
        byte = size & 0x7F
        size >>= 7
    out.append(byte)
    return bytes(out)


def compressible(data: bytes) -> bool:
    """Does a zstd probe of the start of `data` shrink it by a quarter? (Far cheaper than a deflate.)
    Below that, deflate costs more than the bytes it saves are worth: reel's namespace nodes, mostly
    32-byte ids, shrink by about 15%; text and code shrink by half or more."""
    sample = data[:_SAMPLE]
    return len(sample) >= 64 and len(_PROBE.compress(sample)) * 4 < len(sample) * 3


def squeeze(data: bytes) -> bytes:
    """`data` compressed as one zlib stream. The window is no larger than the data: zlib sets up (and
    clears) a window of 2**wbits bytes per stream, which costs a small object more than compressing it;
    inflating accepts any window."""
    return zlib.compress(data, 6, min(15, max(9, (len(data) - 1).bit_length())))


def stored(data: bytes) -> bytes:
    """A zlib stream of `data` in stored (uncompressed) blocks, written out directly: zlib's own level 0
    still sets up a whole compressor per call."""
    out = [_ZLIB_HEADER]
    end = len(data)
    start = 0
    while True:
        piece = data[start : start + _STORED_MAX]
        start += _STORED_MAX
        final = start >= end
        out.append(_STORED_HEAD.pack(final, len(piece), len(piece) ^ 0xFFFF))
        out.append(piece)
        if final:
            break
    out.append(_ADLER.pack(zlib.adler32(data)))
    return b"".join(out)


class OutgoingPack:
    """The entries of one sync commit's pack, added in any order; `finish` adds the trees and the commit."""

    def __init__(self) -> None:
        self.spool: IO[bytes] | None = None
        self.buf = bytearray()
        self.spilled = 0
        self.ends: list[int] = []
        self.kinds: list[int] = []
        self.shas: list[bytes] = []
        self._heads: dict[int, hashlib._Hash] = {}
        self.ids: list[bytes] = []
        """The id of each reel object, in entry order (its git id is the entry's, in `shas`): kept as
        plain bytes, so adding an object makes nothing the cyclic collector tracks; written out in hex
        all at once by `finish`."""

    def _add(self, kind: int, body: bytes, incompressible: bool = False) -> bytes:
        n = len(body)
        digest = hashlib.sha1(_TYPE_NAMES[kind] + b"%d\0" % n)
        digest.update(body)
        sha = digest.digest()
        buf = self.buf
        buf += entry_header(kind, n)
        if not incompressible and compressible(body):
            buf += squeeze(body)
        elif n <= _STORED_MAX:  # one stored block, in place
            buf += _ZLIB_HEADER
            buf += _STORED_HEAD.pack(1, n, n ^ 0xFFFF)
            buf += body
            buf += _ADLER.pack(zlib.adler32(body))
        else:
            buf += stored(body)
        self.ends.append(self.spilled + len(buf))
        self.kinds.append(kind)
        self.shas.append(sha)
        if len(buf) >= _SPOOL:
            self._spill()
        return sha

    def _spill(self) -> None:
        """Move the entries held in memory to the spool file (made on first use)."""
        if self.spool is None:
            import tempfile  # a push of fewer than _SPOOL bytes never spills, so never imports it

            self.spool = tempfile.TemporaryFile()
        self.spool.write(self.buf)
        self.spilled += len(self.buf)
        self.buf.clear()

    def add_object(self, rid: bytes, raw: bytes, incompressible: bool = False) -> None:
        """One reel object (its canonical bytes), filed under `objects/<2 hex>/<62 hex>`; `incompressible`
        (the store's pack holds it stored: its writer found that zstd cannot shrink it) skips the probe.
        The common case, a small object to be stored, is written here in one go: its header, stored
        block head and zlib header are one struct."""
        n = len(raw)
        if 0x10 <= n < 0x800 and (incompressible or not compressible(raw)):
            head = self._heads.get(n)
            if head is None:  # a SHA-1 of the git header alone, copied per object: cheaper than a new one
                head = self._heads[n] = _sha1(b"blob %d\0" % n)
            digest = head.copy()
            digest.update(raw)
            sha = digest.digest()
            buf = self.buf
            buf += _SMALL_STORED.pack(0xB0 | (n & 0x0F), n >> 4, 0x78, 0x01, 1, n, n ^ 0xFFFF)
            buf += raw
            buf += _ADLER.pack(zlib.adler32(raw))
            self.ends.append(self.spilled + len(buf))
            self.kinds.append(_BLOB)
            self.shas.append(sha)
            if len(buf) >= _SPOOL:
                self._spill()
        else:
            self._add(_BLOB, raw, incompressible)
        self.ids.append(rid)

    def finish(self, refs: dict[str, Hash], parents: list[str]) -> str:
        """Add the fan-out trees, the `refs` file, the root tree and the commit; the commit's id.

        The fan-out trees are stored: they are three quarters hex names and binary SHA-1s, which deflate
        shrinks by only about a quarter (and a large push has 256 of them). Each holds entries
        of one mode, so sorting by name is git's own order."""
        shas = self.shas
        if len(shas) != len(self.ids):
            raise AssertionError("the outgoing pack was finished twice")
        names = hexlify(b"".join(self.ids), b" ", HASH_SIZE).split(b" ") if self.ids else []
        shards: dict[bytes, list[bytes]] = {}
        for name, sha in zip(names, shas):
            shards.setdefault(name[:2], []).append(name[2:] + b"\0" + sha)  # all names one length: bytes order
        fanout = [
            (prefix, self._add(_TREE, b"100644 " + b"100644 ".join(sorted(entries)), incompressible=True))
            for prefix, entries in sorted(shards.items())
        ]
        root: list[tuple[bytes, bytes, bytes]] = []
        if fanout:
            root.append(
                (
                    b"40000",
                    b"objects",
                    self._add(_TREE, b"".join(b"40000 " + prefix + b"\0" + sha for prefix, sha in fanout)),
                )
            )
        root.append((b"100644", b"refs", self._add(_BLOB, format_refs(refs))))
        root_sha = self._add(_TREE, b"".join(mode + b" " + name + b"\0" + sha for mode, name, sha in root))
        listed = ", ".join(sorted(refs)) or "no refs"
        message = f"reel sync: {plural(len(names), 'object')}; {listed}\n".encode()
        return self._add(_COMMIT, commit_body(root_sha.hex(), parents, int(time.time()), message)).hex()

    def __len__(self) -> int:
        return len(self.ends)

    def write_to(self, write: Callable[[bytes], object], written: Callable[[int], None] | None = None) -> None:
        """The whole pack, header to trailer, to `write` in pieces of up to a MiB; `written(n)` hears
        of every n entries written."""
        digest = hashlib.sha1()
        head = _PACK_HEADER.pack(b"PACK", 2, len(self.ends))
        digest.update(head)
        write(head)
        done = 0
        at = 0
        for piece in self._pieces():
            digest.update(piece)
            write(piece)
            at += len(piece)
            if written is not None:
                upto = bisect.bisect_right(self.ends, at)
                if upto > done:
                    written(upto - done)
                    done = upto
        write(digest.digest())

    def _pieces(self) -> Iterator[bytes]:
        """The entries' bytes, in order, a piece at a time."""
        if self.spool is None:
            view = memoryview(self.buf)
            for start in range(0, len(view), _READ):
                yield bytes(view[start : start + _READ])
            view.release()
            return
        self._spill()
        self.spool.seek(0)
        for _ in range(self.spilled // _READ + 1):
            piece = self.spool.read(_READ)
            if not piece:
                return
            yield piece

    def records(self, gather: int = 0) -> Iterator[UnpackedObject]:
        """Every entry, finished, for dulwich's pack writer: it sends a record's `comp_chunks` as they are,
        one write (or HTTP chunk) per record. With `gather`, a record carries every entry since the last
        one that carried any once they reach `gather` bytes, and the others carry none: the same bytes in
        the same order, in pieces of about that size. Only for a byte stream to a server (an HTTP body):
        a writer that indexes the records it writes (dulwich's in-process server) needs one each."""
        from dulwich.pack import UnpackedObject  # only dulwich's send-pack needs it

        if self.spool is None:
            chunks: Iterator[bytes] = iter((bytes(self.buf),))
        else:
            self._spill()
            self.spool.seek(0)
            chunks = iter(lambda: self.spool.read(_READ) if self.spool else b"", b"")
        buf = b""
        base = start = 0
        last = len(self.ends) - 1
        for n, (end, kind, sha) in enumerate(zip(self.ends, self.kinds, self.shas, strict=True)):
            while end > base + len(buf):
                more = next(chunks, b"")
                if not more:
                    raise AssertionError("the outgoing pack's spool is shorter than its entries")
                buf, base = buf[start - base :] + more, start
            record = UnpackedObject(kind, sha=sha)
            if end - start >= gather or n == last:
                record.comp_chunks = [buf[start - base : end - base]]
                start = end
            else:
                record.comp_chunks = []
            yield record

    def close(self) -> None:
        if self.spool is not None:
            self.spool.close()


def commit_body(tree: str, parents: list[str], when: int, message: bytes) -> bytes:
    """A git commit's bytes, as git writes them: tree, parents, author and committer (reel sync's
    identity, at `when`, UTC), a blank line, the message."""
    lines = [b"tree " + tree.encode()]
    lines += [b"parent " + p.encode() for p in parents]
    stamp = IDENTITY + b" %d +0000" % when
    lines += [b"author " + stamp, b"committer " + stamp, b"", message]
    return b"\n".join(lines)
