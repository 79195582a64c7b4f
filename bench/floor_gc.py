"""The floor for `reel gc --prune=now`: the least a Python process can do for the same result.

    python3 bench/floor_gc.py        (in a reel store's work tree: the bench's gc stores)

It makes the checks reel's gc makes, on the store shapes the bench builds, with nothing else: no click,
no reelstore, no grace period (prune=now), no progress, no temporary-file sweep. Under gc.lock: every
ref and reflog entry is a root; each pack is opened as reel opens one and its two checksums verified
(BLAKE3 of the pack and of the index); each entry's kind is read from its first byte, so blobs count as
reached unread; every other object reached is read (CRC-32, inflation within its declared size, base
chains, one BLAKE3 against its id) and its links taken from its msgpack body; the refs are read again
(the fence); the kept entries are copied as stored, each CRC checked, deltas re-aimed; loose objects kept
are compressed once; the new pack is written with its trailer, read back and hashed, 256 of its entries
read through the new index, both files fsynced and renamed in; the old packs and loose files go. Prints
`reachable N, packed M`. What it does not handle (a delta whose base goes, a dictionary entry of another
dictionary) it refuses with exit status 3. bench/bench_fastpaths.py runs it beside reel and git.
"""

import array
import gc
import itertools
import mmap
import operator
import os
import struct
import sys
import zlib

import blake3
import msgpack
import zstandard

LEAVES = frozenset({1, 4, 5})
"""blob, capability, effect: the kinds that reference nothing."""
TAGS = {
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
CODES = {kind: code for code, kind in TAGS.items()}
FMT = zstandard.FORMAT_ZSTD1_MAGICLESS
STORED, ZSTD, DICT, BASE = 0, 1, 2, 3
IDS = struct.Struct("32s" * 256)


def fail(what: str) -> None:
    sys.stderr.write(f"error: E007: {what}\n")
    sys.exit(3)


def varint(m: "mmap.mmap | bytes", pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = m[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, pos


def put_varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def column(data: bytes, code: str, at: int, n: int) -> "array.array[int]":
    col = array.array(code)
    col.frombytes(data[at : at + col.itemsize * n])
    col.byteswap()
    return col


class Pack:
    def __init__(self, path: str) -> None:
        self.path = path
        with open(path[:-5] + ".idx", "rb") as f:
            ix = f.read()
        n = int.from_bytes(ix[8:12], "big")
        fan = column(ix, "I", 12, 256)
        if ix[:8] != b"RIDX\0\0\0\1" or len(ix) != 1036 + 52 * n + 64 or fan[255] != n or list(fan) != sorted(fan):
            fail(f"{path}: bad index")
        if blake3.blake3(memoryview(ix)[:-32]).digest() != ix[-32:]:
            fail(f"{path}: index checksum mismatch")
        whole = n - n % 256
        self.ids = list(itertools.chain.from_iterable(IDS.iter_unpack(memoryview(ix)[1036 : 1036 + 32 * whole])))
        self.ids += struct.unpack_from("32s" * (n - whole), ix, 1036 + 32 * whole)
        at = 1036 + 32 * n
        self.offsets, self.crcs, self.mtimes = (
            column(ix, "Q", at, n),
            column(ix, "I", at + 8 * n, n),
            column(ix, "Q", at + 12 * n, n),
        )
        with open(path, "rb") as f:
            self.map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        m = self.map
        magic, version, count, dict_len = struct.unpack_from(">4sIII", m, 0)
        if magic != b"RPAK" or version != 1 or count != n or m[-32:] != ix[-64:-32]:
            fail(f"{path}: pack does not match its index")
        hasher = blake3.blake3()
        with memoryview(m) as view:
            for lo in range(0, len(m) - 32, 8 << 20):
                hasher.update(view[lo : min(len(m) - 32, lo + (8 << 20))])
                m.madvise(mmap.MADV_DONTNEED)
        if hasher.digest() != m[-32:]:
            fail(f"{path}: pack checksum mismatch")
        self.dict = bytes(m[16 : 16 + dict_len])
        self.data_end = len(m) - 32
        self.codes = bytes(operator.itemgetter(*self.offsets)(m)) if n > 1 else bytes(m[o] for o in self.offsets)
        m.madvise(mmap.MADV_DONTNEED)
        self.plain = zstandard.ZstdDecompressor(format=FMT)
        self.with_dict = (
            zstandard.ZstdDecompressor(
                dict_data=zstandard.ZstdCompressionDict(self.dict, dict_type=zstandard.DICT_TYPE_FULLDICT), format=FMT
            )
            if self.dict
            else None
        )

    def head(self, off: int) -> tuple[int, int, int, int | None, int, int]:
        """code, method, size, base offset, data start, data end."""
        m = self.map
        size, pos = varint(m, off + 2)
        base = None
        if m[off + 1] == BASE:
            dist, pos = varint(m, pos)
            base = off - dist
        length, pos = varint(m, pos)
        return m[off], m[off + 1], size, base, pos, pos + length

    def body(self, off: int) -> tuple[int, bytes]:
        code, method, size, base, start, end = self.head(off)
        data = self.map[start:end]
        if method == STORED:
            return code, data
        if method == ZSTD:
            return code, self.plain.decompress(data, max_output_size=size)
        if method == DICT and self.with_dict is not None:
            return code, self.with_dict.decompress(data, max_output_size=size)
        if method == BASE and base is not None:
            prefix = self.body(base)[1]
            dec = zstandard.ZstdDecompressor(
                dict_data=zstandard.ZstdCompressionDict(prefix, dict_type=zstandard.DICT_TYPE_RAWCONTENT), format=FMT
            )
            return code, dec.decompress(data, max_output_size=size)
        fail(f"{self.path}: entry at {off} has an unknown method")
        raise AssertionError

    def read(self, h: bytes, i: int) -> bytes:
        off = self.offsets[i]
        end = self.head(off)[5]
        if zlib.crc32(self.map[off:end]) != self.crcs[i]:
            fail(f"object {h.hex()}: entry checksum mismatch")
        code, body = self.body(off)
        raw = TAGS[code] + b"\0" + body
        if blake3.blake3(raw).digest() != h:
            fail(f"object {h.hex()}: content does not hash to its id")
        return raw


def roots(reel: str) -> list[bytes]:
    out = []
    for top in ("refs", "logs"):
        for dirpath, _, files in os.walk(os.path.join(reel, top)):
            for name in files:
                with open(os.path.join(dirpath, name), "rb") as f:
                    for line in f.read().split(b"\n"):
                        fields = line.split(b" ")
                        for word in fields[:1] if top == "refs" else fields[1:3]:
                            if len(word) == 64 and word != b"0" * 64:
                                out.append(bytes.fromhex(word.decode()))
    return out


def links(value: object, out: list[bytes]) -> None:
    if type(value) is bytes and len(value) == 32:
        out.append(value)
    elif type(value) in (list, tuple):
        for v in value:  # type: ignore[attr-defined]
            links(v, out)
    elif type(value) is dict:
        for v in value.values():  # type: ignore[attr-defined]
            links(v, out)


def main() -> None:
    reel = os.path.join(os.getcwd(), ".reel")
    lock = os.path.join(reel, "gc.lock")
    os.close(os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    objects = os.path.join(reel, "objects")
    pack_dir = os.path.join(objects, "pack")
    packs = sorted(
        (Pack(os.path.join(pack_dir, p)) for p in os.listdir(pack_dir) if p.endswith(".pack")),
        key=lambda p: -len(p.ids),
    )
    loose = {}
    for shard in os.listdir(objects):
        if len(shard) == 2:
            for name in os.listdir(os.path.join(objects, shard)):
                loose[bytes.fromhex(shard + name)] = os.path.join(objects, shard, name)
    leaves: set[bytes] = set()
    direct: dict[bytes, tuple[Pack, int]] = {}
    for p in packs:
        flags = bytes(map(LEAVES.__contains__, p.codes))
        leaves.update(itertools.compress(p.ids, flags))
        for i in itertools.compress(range(len(flags)), map(operator.not_, flags)):
            direct.setdefault(p.ids[i], (p, i))
    # The mark, then the fence (the refs read again).
    seen: set[bytes] = set()
    stack = [h for h in roots(reel) if h not in seen and not seen.add(h)]  # type: ignore[func-returns-value]
    while True:
        while stack:
            h = stack.pop()
            if h in leaves:
                continue
            hit = direct.get(h)
            if hit is not None:
                raw = hit[0].read(h, hit[1])
            elif h in loose:
                with open(loose[h], "rb") as f:
                    data = f.read()
                raw = zstandard.ZstdDecompressor().decompress(data)
                if blake3.blake3(raw).digest() != h:
                    fail(f"object {h.hex()}: content does not hash to its id")
            else:
                fail(f"object {h.hex()} is missing")
            nul = raw.index(b"\0")
            body = msgpack.unpackb(memoryview(raw)[nul + 1 :], use_list=False, raw=False)
            kids: list[bytes] = []
            if raw[:nul] == b"tree":
                kids = [e[1] for e in body["entries"]]
            else:
                links(body, kids)
            fresh = set(kids)
            fresh -= seen
            seen |= fresh
            stack += fresh - leaves
        again = [h for h in roots(reel) if h not in seen]
        if not again:
            break
        seen.update(again)
        stack = again
    # The selection: what is reached, from each pack's listing.
    dict_bytes = next((p.dict for p in packs if p.dict), b"")
    out_ids: list[bytes] = []
    out_at = array.array("q")
    out_crc = array.array("q")
    out_mtime = array.array("q")
    spans = []
    size = 0
    taken: set[bytes] = set()
    for p in packs:
        keep = bytearray(map(seen.__contains__, p.ids))
        if taken:
            for i in itertools.compress(range(len(keep)), map(taken.__contains__, p.ids)):
                keep[i] = 0
        positions = list(itertools.compress(range(len(keep)), keep))
        if p is not packs[-1]:
            taken.update(map(p.ids.__getitem__, positions))
        chosen = list(map(p.offsets.__getitem__, positions))
        keys = sorted(map(operator.add, map(operator.add, p.offsets, p.offsets), keep))
        keys.append(2 * p.data_end)
        tags = bytes(map((1).__and__, keys))
        offs = list(map(operator.rshift, itertools.compress(keys, tags), itertools.repeat(1)))
        ends = list(
            map(operator.rshift, itertools.compress(itertools.islice(keys, 1, None), tags), itertools.repeat(1))
        )
        rank = dict(zip(chosen, range(len(chosen))))
        order = list(map(rank.__getitem__, offs))
        m = p.map
        with memoryview(m) as view:
            got = list(map(zlib.crc32, map(view.__getitem__, map(slice, offs, ends))))
            if got != list(map(p.crcs.__getitem__, map(positions.__getitem__, order))):
                fail(f"{p.path}: an entry fails its checksum")
            methods = bytes(map(view.__getitem__, map((1).__add__, offs)))
        m.madvise(mmap.MADV_DONTNEED)
        if DICT in methods and p.dict != dict_bytes:
            fail("a dictionary entry of another dictionary (the floor does not pack afresh)")
        at = list(itertools.accumulate(map(operator.sub, ends, offs), initial=size))
        heads = {}
        if BASE in methods:
            # Deltas keep their base (it must be kept too) at a new distance: a new head, maybe longer.
            rank_of = dict(zip(offs, range(len(offs))))
            shift = 0
            for k in range(len(offs)):
                at[k] += shift
                if methods[k] == BASE:
                    code, method, body_size, base, start, end = p.head(offs[k])
                    if base not in rank_of:
                        fail("a delta whose base goes (the floor does not pack afresh)")
                    head = bytes((code, method)) + put_varint(body_size) + put_varint(at[k] - at[rank_of[base]])
                    head += put_varint(end - start)
                    shift += len(head) - (start - offs[k])
                    heads[k] = (head, start)
                    got[k] = zlib.crc32(m[start:end], zlib.crc32(head))
            at[-1] += shift
        where = array.array("q", bytes(8 * len(positions)))
        crc = array.array("q", where)
        for j, new, c in zip(order, at, got):
            where[j], crc[j] = new, c
        out_ids += map(p.ids.__getitem__, positions)
        out_at += where
        out_crc += crc
        out_mtime += array.array("q", map(p.mtimes.__getitem__, positions))
        cuts = set(itertools.compress(range(1, len(offs)), map(operator.ne, offs[1:], ends[:-1])))
        cuts.update(heads, (k + 1 for k in heads), (0, len(offs)))
        edges = sorted(cuts)
        for lo, hi in zip(edges, edges[1:]):
            if lo in heads:
                spans.append((m, heads[lo][0], heads[lo][1], ends[lo]))
            else:
                spans.append((m, b"", offs[lo], ends[hi - 1]))
        size = at[-1]
    fresh = [h for h in loose if h in seen and h not in leaves and h not in direct]
    # The new pack.
    tmp = os.path.join(pack_dir, f".tmp-floor-{os.getpid()}.pack")
    hasher = blake3.blake3()
    first = 16 + len(dict_bytes)
    comp = zstandard.ZstdCompressor(
        compression_params=zstandard.ZstdCompressionParameters.from_level(
            3, format=FMT, write_content_size=False, write_checksum=False, write_dict_id=False
        )
    )
    with open(tmp, "wb") as f:

        def out(data: "bytes | memoryview") -> None:
            hasher.update(data)
            f.write(data)

        out(struct.pack(">4sIII", b"RPAK", 1, len(out_ids) + len(fresh), len(dict_bytes)) + dict_bytes)
        for m, head, start, end in spans:
            if head:
                out(head)
            with memoryview(m) as view:
                for at in range(start, end, 1 << 20):
                    out(view[at : min(end, at + (1 << 20))])
                    lo = at - at % mmap.PAGESIZE
                    m.madvise(mmap.MADV_DONTNEED, lo, min(end, at + (1 << 20)) - lo)
        at = first + size
        for i in range(len(out_at)):
            out_at[i] += first
        for h in fresh:
            with open(loose[h], "rb") as lf:
                raw = zstandard.ZstdDecompressor().decompress(lf.read())
            if blake3.blake3(raw).digest() != h:
                fail(f"object {h.hex()}: content does not hash to its id")
            nul = raw.index(b"\0")
            body = raw[nul + 1 :]
            data = comp.compress(body)
            method = ZSTD if len(data) < len(body) else STORED
            data = data if method == ZSTD else body
            head = bytes((CODES[raw[:nul]], method)) + put_varint(len(body)) + put_varint(len(data))
            out(head)
            out(data)
            out_ids.append(h)
            out_at.append(at)
            out_crc.append(zlib.crc32(data, zlib.crc32(head)))
            out_mtime.append(int(os.stat(loose[h]).st_mtime))
            at += len(head) + len(data)
        trailer = hasher.digest()
        f.write(trailer)
        f.flush()
        os.fsync(f.fileno())
    check = blake3.blake3()
    with open(tmp, "rb") as f:
        left = os.fstat(f.fileno()).st_size - 32
        while left > 0:
            piece = f.read(min(left, 1 << 20))
            check.update(piece)
            left -= len(piece)
        if check.digest() != trailer or f.read() != trailer:
            fail("the pack read back does not match what was written")
    order = sorted(range(len(out_ids)), key=out_ids.__getitem__)
    joined = b"".join(map(out_ids.__getitem__, order))
    n = len(order)
    fan = list(itertools.accumulate(bytes(joined[::32]).count(bytes([b])) for b in range(256)))
    body = b"".join(
        [
            struct.pack(">4sII", b"RIDX", 1, n),
            struct.pack(">256I", *fan),
            joined,
            struct.pack(f">{n}Q", *map(out_at.__getitem__, order)),
            struct.pack(f">{n}I", *map(out_crc.__getitem__, order)),
            struct.pack(f">{n}Q", *map(out_mtime.__getitem__, order)),
            trailer,
        ]
    )
    idx = body + blake3.blake3(body).digest()
    name = os.path.join(pack_dir, f"pack-{trailer.hex()}")
    with open(name + ".idx.tmp", "wb") as f:
        f.write(idx)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, name + ".pack")
    os.replace(name + ".idx.tmp", name + ".idx")
    new = Pack(name + ".pack")
    for i in sorted({*range(0, n, max(1, n // 256)), n - 1}):
        new.read(new.ids[i], i)
    fd = os.open(pack_dir, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)
    for p in packs:
        if p.path != name + ".pack":  # the same objects packed again make the same pack
            os.unlink(p.path[:-5] + ".idx")
            os.unlink(p.path)
    for path in loose.values():
        os.unlink(path)
    os.unlink(lock)
    print(f"reachable {len(seen)}, packed {n}")


if __name__ == "__main__":
    try:
        main()
    finally:
        gc.freeze()  # as reel does: the exit's last collection walks none of what lives to the end
