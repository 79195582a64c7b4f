"""The floor for `reel cat-file --batch`: the least a Python process can do to give the same answers.

    python3 bench/floor_batch.py < ids        (in a reel store's work tree, every object packed)

It makes the checks reel makes and prints the same bytes, with nothing else: no click, no reelstore,
no revision names, no loose objects or segments (an id no pack holds is `missing`). Each pack is
opened as reel opens one (index magic, size and fan-out; pack magic, count and trailer against the
index). Each id: one dict probe, the entry's CRC-32, its frame header checked, one inflation within
the declared size (base chains resolved), one BLAKE3 of `kind\\0body` compared with the id, a blob's
body checked to be one msgpack bin; then `<id> <kind> <size>\\n<content>\\n`. Damage is
`error: E007: …` and exit status 3, as reel. bench/bench_fastpaths.py runs it beside reel and git.
"""

import array
import gc
import mmap
import os
import sys
import zlib
from binascii import hexlify, unhexlify
from collections.abc import Callable

import blake3
import zstandard

KINDS = {
    1: b"blob",
    2: b"tree",
    3: b"delta",
    4: b"capability",
    5: b"effect",
    6: b"effects",
    7: b"view",
    8: b"record",
    9: b"journal",
    10: b"finding",
    11: b"chunks",
    12: b"opevent",
    13: b"recording",
}
TAGS = {code: kind + b"\0" for code, kind in KINDS.items()}
BIN = {0xC4: 1, 0xC5: 2, 0xC6: 4}
FMT = zstandard.FORMAT_ZSTD1_MAGICLESS
HEX = b"0123456789abcdef"


def fail(what: str) -> None:
    sys.stderr.write(f"error: E007: {what}\n")
    sys.exit(3)


def varint(m: mmap.mmap, pos: int, end: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= end or shift > 63:
            raise ValueError("varint runs past the entry")
        byte = m[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, pos


class Pack:
    def __init__(self, path: str) -> None:
        with open(path[:-5] + ".idx", "rb") as f:
            ix = f.read()
        n = int.from_bytes(ix[8:12], "big")
        fan = array.array("I", ix[12:1036])
        fan.byteswap()
        if ix[:8] != b"RIDX\0\0\0\1" or len(ix) != 1036 + 52 * n + 64 or fan[255] != n or list(fan) != sorted(fan):
            fail(f"{path}: bad index")
        at = 1036 + 32 * n
        self.pos = dict(zip(hexlify(ix[1036:at], b"\n", 32).split(b"\n"), range(n))) if n else {}
        self.off, self.crc = array.array("Q", ix[at : at + 8 * n]), array.array("I", ix[at + 8 * n : at + 12 * n])
        self.off.byteswap()
        self.crc.byteswap()
        with open(path, "rb") as f:
            self.m = m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        dlen = int.from_bytes(m[12:16], "big")
        if (
            m[:8] != b"RPAK\0\0\0\1"
            or int.from_bytes(m[8:12], "big") != n
            or m[-32:] != ix[-64:-32]
            or dlen > 1 << 20
            or 16 + dlen > len(m) - 32
        ):
            fail(f"{path}: bad pack")
        self.start, self.end = 16 + dlen, len(m) - 32
        self.plain = zstandard.ZstdDecompressor(format=FMT, max_window_size=1 << 27)
        full = zstandard.ZstdCompressionDict(m[16 : 16 + dlen], dict_type=zstandard.DICT_TYPE_FULLDICT)
        self.dict = zstandard.ZstdDecompressor(dict_data=full, format=FMT, max_window_size=1 << 27) if dlen else None

    def entry(self, off: int) -> tuple[int, int, int, int | None, int, int]:
        """(kind code, method, size, base offset, payload start, payload end) of the entry at `off`."""
        m, end = self.m, self.end
        if not self.start <= off < end - 2:
            raise ValueError(f"offset {off} is outside the pack's entries")
        code, method, b = m[off], m[off + 1], m[off + 2]
        if code not in KINDS or method > 3:
            raise ValueError(f"unknown kind {code} or method {method}")
        size, pos = (b, off + 3) if b < 0x80 else varint(m, off + 2, end)
        if size > 64 << 20:
            raise ValueError("declared size exceeds the object limit")
        base = None
        if method == 3:
            dist, pos = varint(m, pos, end)
            if dist == 0 or dist > off - self.start:
                raise ValueError("base points outside the pack")
            base = off - dist
        b = m[pos] if pos < end else 0x80
        length, pos = (b, pos + 1) if b < 0x80 else varint(m, pos, end)
        if pos + length > end:
            raise ValueError("entry runs past the end of the pack")
        return code, method, size, base, pos, pos + length

    def body(self, method: int, size: int, base: int | None, pos: int, stop: int, depth: int = 0) -> bytes:
        """An entry's body: its payload inflated within `size` (a base chain resolved first)."""
        data = self.m[pos:stop]
        if method == 0:
            return data
        if pos == stop or data[0] & 0xE0:
            raise ValueError("zstd frame declares a content size (or is empty)")
        if method == 1:
            dec = self.plain
        elif method == 2 and self.dict is not None:
            dec = self.dict
        elif method == 3 and depth < 64 and base is not None:
            prefix = self.body(*self.entry(base)[1:], depth + 1)
            raw = zstandard.ZstdCompressionDict(prefix, dict_type=zstandard.DICT_TYPE_RAWCONTENT)
            dec = zstandard.ZstdDecompressor(dict_data=raw, format=FMT, max_window_size=1 << 27)
        else:
            raise ValueError("no pack dictionary, or a base chain longer than 64")
        body: bytes = dec.decompress(data, max_output_size=size, allow_extra_data=False)
        if len(body) != size:
            raise ValueError("entry inflates to the wrong size")
        return body


def answer(packs: list[Pack], names: list[bytes], buf: bytearray, write: Callable[[bytes], object]) -> None:
    """Every name's answer, in order, gathered in `buf` (a content of 4 KiB or more written straight out).
    A full lowercase hex id is one dict probe. A stored entry (its size and length one varint written
    twice) is parsed inline, any other entry by `Pack.entry`."""
    crc32, hasher = zlib.crc32, blake3.blake3()
    for name in names:
        for p in packs:
            i = p.pos.get(name, -1)
            if i >= 0:
                break
        else:
            buf += name + b" missing\n"
            continue
        off, m, stored = p.off[i], p.m, False
        if p.start <= off <= p.end - 6:
            code, method, a, b, c, d = m[off : off + 6]
            if method == 0 and code in TAGS:
                if a < 0x80:
                    size, pos, stored = a, off + 4, b == a
                elif b < 0x80:
                    size, pos, stored = (a & 0x7F) | b << 7, off + 6, c == a and d == b
        try:
            if not stored:
                code, method, size, base, pos, stop = p.entry(off)
            elif (stop := pos + size) > p.end:
                raise ValueError("entry runs past the end of the pack")
            entry = m[off:stop]
            if crc32(entry) != p.crc[i]:
                raise ValueError("entry checksum mismatch")
            raw = TAGS[code] + (entry[pos - off :] if method == 0 else p.body(method, size, base, pos, stop))
        except (ValueError, zstandard.ZstdError) as exc:
            fail(f"object {name.decode()} is damaged: {exc}")
        hasher.reset()
        hasher.update(raw)
        if hasher.digest() != unhexlify(name):
            fail(f"object {name.decode()} is damaged: content does not hash to its id")
        start = len(TAGS[code])
        if code == 1:
            w = BIN.get(raw[start], 0) if len(raw) > start else 0
            if not w or int.from_bytes(raw[start + 1 : start + 1 + w], "big") != len(raw) - start - 1 - w:
                fail(f"object {name.decode()} is damaged: blob body is not a single msgpack bin")
            start += 1 + w
        buf += b"%s %s %d\n" % (name, KINDS[code], len(raw) - start)
        if len(raw) - start >= 4096:
            write(buf)
            buf.clear()
            write(memoryview(raw)[start:])  # type: ignore[arg-type]
        else:
            buf += raw[start:]
        buf += b"\n"


def main() -> None:
    gc.freeze()  # as reel does: what exists now lives until exit, so no collection (nor the exit) walks it
    where = ".reel/objects/pack/"
    packs = [Pack(where + name) for name in sorted(os.listdir(where)) if name.endswith(".pack")]
    out, stdin, pending = sys.stdout.buffer, sys.stdin.buffer, b""

    def serve(names: list[bytes]) -> None:
        buf = bytearray()
        try:
            answer(packs, names, buf, out.write)
        finally:  # the answers before a damaged object are printed, as reel does
            out.write(buf)
            out.flush()

    while chunk := stdin.read1(65536):
        *names, pending = (pending + chunk).split(b"\n")
        serve(names)
    if pending:
        serve([pending])


if __name__ == "__main__":
    main()
