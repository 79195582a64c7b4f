"""Writing packs: order the objects so that versions sit together, train a dictionary for the small
ones, compress each alone, with the dictionary or against an earlier entry, and write the pack and
then its index, atomically. The format is read by `pack.py` and documented in docs/format.md."""

from __future__ import annotations

import array
import bisect
import functools
import itertools
import operator
import os
import time
import zlib
from collections.abc import Callable, Iterable, Mapping, MutableSequence, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from pathlib import Path

import blake3
import zstandard

from reelstore.errors import StorageError
from reelstore.objects import Hash
from reelstore.storage.fileio import fsync_dir, temp_name
from reelstore.storage.pack import (
    _FLAGS,
    BASE,
    DICT,
    KIND_CODES,
    KIND_NAMES,
    METHOD_NAMES,
    PACK_HEADER,
    PACK_MAGIC,
    STORED,
    ZSTD,
    Pack,
    _varint,
    release,
    split_raw,
)
from reelstore.storage.pack_index import TRAILER, VERSION, Columns, index_parts


@dataclass
class PackItem:
    """One object to pack: id, canonical bytes, mtime (seconds) and an optional name hint for deltas.

    A large object may come as `load` (a callable returning its canonical bytes) and its `kind`
    instead of `raw`: the writer then reads it only when its turn comes and drops it once no later
    entry can use it as a base, so a pack of any size is written in bounded memory."""

    id: Hash
    raw: bytes
    mtime: int
    hint: str = ""
    kind: str = ""
    load: Callable[[], bytes] | None = None


@dataclass
class PackOptions:
    level: int = 3
    depth: int = 50
    """Longest chain of base entries a delta may sit on."""
    window: int = 3
    """How many earlier entries of the same group are tried as a base."""
    min_delta: int = 64
    """Bodies smaller than this are never delta-compressed (the dictionary serves them better)."""


@dataclass
class PackResult:
    name: str
    pack_path: Path | None
    idx_path: Path | None
    count: int
    checksum: bytes
    size: int = 0
    methods: dict[str, int] = field(default_factory=dict)


class _Entry:
    __slots__ = ("id", "code", "body", "mtime", "offset", "crc", "depth", "zc", "load")

    def __init__(self, item: PackItem) -> None:
        self.id = item.id
        self.load = item.load
        if item.load is not None:
            self.code, self.body = KIND_CODES[item.kind], b""
        else:
            self.code, self.body = split_raw(item.raw)
        self.mtime = int(item.mtime)
        self.offset = 0
        self.crc = 0
        self.depth = 0
        self.zc: zstandard.ZstdCompressor | None = None

    def loaded(self) -> None:
        """Read a lazy entry's body now (its kind must be the one it was listed with)."""
        if self.load is not None and not self.body:
            code, self.body = split_raw(self.load())
            if code != self.code:
                raise StorageError(f"object {self.id.hex()} changed kind while it was packed")

    def drop(self) -> None:
        """Forget the body and compressor once no later entry can use this one as a base."""
        self.zc = None
        if self.load is not None:
            self.body = b""


TRAIN_SAMPLES = 2000
"""Most bodies a dictionary is trained on (spread over the pack)."""


def _train(entries: list[_Entry], level: int) -> bytes:
    """A zstd dictionary for this pack's small bodies, or b"" when it would not pay for itself.

    Bodies held in memory are all candidates; of the lazy ones (read only when written), an even spread
    of at most TRAIN_SAMPLES is read now and forgotten again, so training stays in bounded memory."""
    lazy = [e for e in entries if e.load is not None]
    step = max(1, len(lazy) // TRAIN_SAMPLES)
    for e in lazy[::step]:
        e.loaded()
    samples: list[bytes | bytearray | memoryview] = [e.body for e in entries if 16 <= len(e.body) <= 4096]
    for e in lazy[::step]:
        e.drop()
    small = len(samples) * (step if lazy else 1)
    if len(samples) < 256 and small < 256:
        return b""
    samples = samples[:: max(1, len(samples) // TRAIN_SAMPLES)]
    if len(samples) < 16:
        return b""
    # A dictionary holds what the bodies share: if a spread of them side by side does not compress,
    # there is nothing to learn, and training (and compressing every small body with it) is wasted.
    joined = b"".join(samples[:: max(1, len(samples) // 256)])
    if len(zstandard.ZstdCompressor(level=1).compress(joined)) * 10 > len(joined) * 9:
        return b""
    total = sum(len(s) for s in samples)
    size = min(64 * 1024, max(4096, total // 20))
    try:
        trained = zstandard.train_dictionary(size, samples, k=200, d=8, steps=1, level=level)
    except zstandard.ZstdError:
        return b""
    # Keep it only if it saves more on this pack's small bodies than it costs to store.
    probe = samples[:: max(1, len(samples) // 200)]
    params = zstandard.ZstdCompressionParameters.from_level(level, **_FLAGS)
    plain = zstandard.ZstdCompressor(compression_params=params)
    with_dict = zstandard.ZstdCompressor(dict_data=trained, compression_params=params)
    # Against what each body would cost anyway: one that neither shrinks is stored, whichever is tried.
    saved = sum(min(len(b), len(plain.compress(b))) - min(len(b), len(with_dict.compress(b))) for b in probe)
    return trained.as_bytes() if saved * small / len(probe) > 2 * len(trained.as_bytes()) else b""


DICT_MAX = 8192
"""Bodies up to this size are compressed with the pack's dictionary when it has one."""


class _Compressor:
    def __init__(self, dict_bytes: bytes, opts: PackOptions) -> None:
        self.opts = opts
        params = zstandard.ZstdCompressionParameters.from_level(opts.level, **_FLAGS)
        self.plain = zstandard.ZstdCompressor(compression_params=params)
        self.dict = None
        if dict_bytes:
            zdict = zstandard.ZstdCompressionDict(dict_bytes, dict_type=zstandard.DICT_TYPE_FULLDICT)
            self.dict = zstandard.ZstdCompressor(dict_data=zdict, compression_params=params)

    def alone(self, body: bytes) -> tuple[int, bytes]:
        """One compression: with the dictionary for a small body (a dictionary trained on this pack's
        small bodies does at least as well as none), else plain; stored when that does not shrink it,
        so incompressible data costs one attempt."""
        method, comp = (DICT, self.dict) if self.dict is not None and len(body) <= DICT_MAX else (ZSTD, self.plain)
        data = comp.compress(body)
        return (method, data) if len(data) < len(body) else (STORED, body)

    def against(self, base: _Entry, body: bytes) -> bytes:
        """`body` compressed with `base`'s body as prefix; the compressor is kept on the base entry, which
        serves as a candidate for up to `window` later entries."""
        if base.zc is None:
            # Tables sized for the prefix keep it cheap to load; the match, not the level, does the work.
            size = 2 * len(base.body)
            params = zstandard.ZstdCompressionParameters.from_level(1, source_size=size, **_FLAGS)
            zdict = zstandard.ZstdCompressionDict(base.body, dict_type=zstandard.DICT_TYPE_RAWCONTENT)
            base.zc = zstandard.ZstdCompressor(dict_data=zdict, compression_params=params)
        return base.zc.compress(body)


def _order(items: list[_Entry], hints: dict[Hash, str]) -> list[_Entry]:
    """Group likely-similar objects together: same kind and name, then in the order given. Callers
    pass objects in walk order (newest history first), so each version sits beside its neighbours."""
    if not hints:  # the same order: sorting is stable
        return sorted(items, key=operator.attrgetter("code"))
    return [e for _, e in sorted(enumerate(items), key=lambda p: (p[1].code, hints.get(p[1].id, ""), p[0]))]


@dataclass
class Reuse:
    """Entries of an open pack whose checksums were verified (`Pack.checksums_ok`), to be copied into a
    new pack as they are stored, the way git reuses deltas: `positions` in its index, with the mtime
    each is to carry. Each entry's CRC is checked as it is copied; `damaged` hears of one that fails."""

    pack: Pack
    positions: Sequence[int]
    mtimes: Sequence[int]
    columns: Columns | None = None
    """The pack's `index.columns()`, if the caller has read them already."""
    hints: Mapping[bytes, str] = field(default_factory=dict)
    """Name hints of the ids (see PackItem), for those packed afresh."""
    versions: AbstractSet[str] = frozenset()
    """Hints shared by several objects of the new pack (versions of one file): those of a group commit's
    pack are packed afresh, and the first copied one of each seeds the delta search of the others."""

    @functools.cached_property
    def named(self) -> AbstractSet[bytes]:
        """The ids whose hint is one of `versions`: found once (a few names among many ids)."""
        hints = self.hints
        return set(itertools.compress(hints.keys(), map(self.versions.__contains__, hints.values())))


IndexColumns = tuple[list[bytes], MutableSequence[int], MutableSequence[int], MutableSequence[int]]
"""A pack's index rows as columns: ids, offsets, CRCs, mtimes (the numbers in compact arrays)."""


def _columns() -> IndexColumns:
    return [], array.array("q"), array.array("q"), array.array("q")

COPY_PIECE = 1 << 20
"""Copied bytes are written, and their mapped pages released, this many at a time."""
CHECK_PIECE = 8192
"""Entries whose CRCs are checked in one go (their mapped pages then released)."""


class _Copies:
    """The plan for the entries copied from other packs: written first, in their packs' order, so a
    copied delta still follows its base (its distance rewritten if entries between them went)."""

    def __init__(self, reuse: Sequence[Reuse], damaged: Callable[[Hash], None] | None) -> None:
        self.dict_bytes: bytes | None = next((r.pack._dict_bytes for r in reuse if r.pack._dict_bytes), None)
        self.columns: IndexColumns = _columns()
        """Index rows of the copies, sorted by id within each source pack; offsets relative to the
        first entry."""
        self.spans: list[tuple[Pack, bytes, int, int, int]] = []
        """(pack, new head or b"", start, end, entries): runs of source bytes to write."""
        self.fallback: list[PackItem] = []
        """Entries that cannot be copied (a delta whose base stays behind, a dictionary entry of
        another dictionary): packed afresh, read (and re-hashed) from their pack."""
        self.counts = dict.fromkeys(METHOD_NAMES.values(), 0)
        self.size = 0
        self.tails: dict[tuple[int, str], tuple[int, int, Hash, Pack, int]] = {}
        """(kind code, hint) -> the first copied entry of that name: (offset, chain depth, id, pack,
        index position), a delta base for the fresh objects of the same name."""
        for r in reuse:
            self._plan(r, damaged)

    def _plan(self, r: Reuse, damaged: Callable[[Hash], None] | None) -> None:
        """Plan one pack's entries, column by column (one Python step per entry would cost more than
        copying it): their extents in pack order, their CRCs checked, deltas given their new distance
        and entries that cannot be copied as they are handed to `fallback`."""
        pack, m = r.pack, r.pack.map
        ids, offsets, crcs, _ = r.columns or pack.index.columns()
        order, offs, ends = _pack_order(pack, offsets, r.positions)
        pos: Sequence[int] = array.array("q", map(r.positions.__getitem__, order))
        bad, methods, got = self._check(pack, pos, offs, ends, crcs)
        for k in bad:
            h = Hash(ids[pos[k]])
            if damaged is None:
                raise StorageError(f"object {h.hex()} in {pack.name} is damaged: entry checksum mismatch", id=h)
            damaged(h)
        if bad:
            good = [k for k in range(len(pos)) if k not in bad]
            order, pos, offs, ends, got = ([col[k] for k in good] for col in (order, pos, offs, ends, got))
            methods = bytes(methods[k] for k in good)
        n = len(offs)
        if not n:
            return
        sizes = list(map(operator.sub, ends, offs))
        redo = {BASE} if pack._dict_bytes == (self.dict_bytes or b"") else {BASE, DICT}
        # A pack with a dictionary or deltas was written by a full pass of this writer (gc, repack, a
        # roll-up): its entries are copied. Otherwise (a group commit's pack: each entry compressed
        # alone) only what packing again could not improve is: stored entries (found incompressible
        # once), and plain ones too large for a dictionary that are not versions of a file.
        settled = bool(pack._dict_bytes) or BASE in methods
        forced: set[int] = set()
        if not settled:
            forced.update(k for k in itertools.compress(range(n), map(ZSTD.__eq__, methods)) if sizes[k] <= DICT_MAX)
            if r.versions:
                forced.update(itertools.compress(range(n), map(r.named.__contains__, map(ids.__getitem__, pos))))
        special = sorted(forced.union(itertools.compress(range(n), map(redo.__contains__, methods))))
        mtime_of = list(map(r.mtimes.__getitem__, order)) if special else []
        heads, dropped, depths = self._rebase(r, special, forced, methods, offs, sizes, pos, ids, mtime_of)
        at = list(itertools.accumulate(sizes, initial=self.size))
        # The index rows go out in index order (sorted by id), so the new index sorts from a few long
        # runs: each copied entry's new offset is put back at its place in `r.positions`.
        where = array.array("q", bytes(8 * len(r.positions)))
        crc = array.array("q", where)
        for j, new, checked in zip(order, at, got):
            where[j], crc[j] = new, checked
        with memoryview(m) as view:
            for k, (head, start) in heads.items():
                crc[order[k]] = zlib.crc32(view[start : ends[k]], zlib.crc32(head))
        out_ids, out_at, out_crc, out_mtime = self.columns
        first = len(out_ids)
        if bad or dropped:
            keep = bytearray(len(r.positions))
            for k in range(n):
                if k not in dropped:
                    keep[order[k]] = 1
            out_ids.extend(itertools.compress(map(ids.__getitem__, r.positions), keep))
            out_at.extend(itertools.compress(where, keep))
            out_crc.extend(itertools.compress(crc, keep))
            out_mtime.extend(itertools.compress(r.mtimes, keep))
        else:
            out_ids.extend(map(ids.__getitem__, r.positions))
            out_at.extend(where)
            out_crc.extend(crc)
            out_mtime.extend(r.mtimes)
        if settled and r.versions:
            # Found in index order (the ids in the order they lie in memory), then taken in pack order.
            named = map(r.named.__contains__, map(ids.__getitem__, r.positions))
            gone = {order[k] for k in dropped}
            depth = {order[k]: d for k, d in depths.items()}
            places = [j for j in itertools.compress(range(len(r.positions)), named) if j not in gone]
            for j in sorted(places, key=where.__getitem__):
                i = r.positions[j]
                h = Hash(ids[i])
                # The first of a name in pack order: the newest version (a walk reaches history newest first).
                self.tails.setdefault((m[offsets[i]], r.hints[h]), (where[j], depth.get(j, 0), h, pack, i))
        for method, name in METHOD_NAMES.items():
            self.counts[name] += methods.count(method) - sum(methods[k] == method for k in dropped)
        # Runs of adjacent entries are written in one piece; they break every 1000 entries, where
        # progress is reported.
        cuts = set(itertools.compress(range(1, n), map(operator.ne, offs[1:], ends[:-1])))
        cuts.update(special, (k + 1 for k in special), range(-first % 1000, n, 1000), (0, n))
        edges = sorted(cuts)
        for lo, hi in zip(edges, edges[1:]):
            if lo in dropped:
                continue
            if lo in heads:
                head, start = heads[lo]
                self.spans.append((pack, head, start, ends[lo], 1))
            else:
                self.spans.append((pack, b"", offs[lo], ends[hi - 1], hi - lo))
        self.size = at[n]

    @staticmethod
    def _check(pack: Pack, pos: Sequence[int], offs: Sequence[int], ends: Sequence[int], crcs: Sequence[int]
               ) -> tuple[set[int], bytes, Sequence[int]]:
        """Which of the entries (in pack order) fail their index CRC, each one's method byte, and the
        CRCs found; the mapped pages are let go as it goes."""
        bad: set[int] = set()
        methods = bytearray()
        found = array.array("q")
        with memoryview(pack.map) as view:
            for lo in range(0, len(offs), CHECK_PIECE):
                hi = min(len(offs), lo + CHECK_PIECE)
                got = list(map(zlib.crc32, map(view.__getitem__, map(slice, offs[lo:hi], ends[lo:hi]))))
                want = list(map(crcs.__getitem__, pos[lo:hi]))
                if got != want:
                    bad.update(lo + k for k, (g, w) in enumerate(zip(got, want)) if g != w)
                methods += bytes(map(view.__getitem__, map((1).__add__, offs[lo:hi])))
                found.extend(got)
                release(pack.map, offs[lo], ends[hi - 1])
        return bad, bytes(methods), found

    def _rebase(self, r: Reuse, special: list[int], forced: set[int], methods: Sequence[int], offs: Sequence[int],
                sizes: list[int], pos: Sequence[int], ids: list[bytes], mtimes: Sequence[int]
                ) -> tuple[dict[int, tuple[bytes, int]], set[int], dict[int, int]]:
        """Deltas whose base is copied too get a new head with their new distance (`sizes` updated);
        the other special entries (`forced` ones, deltas whose base goes, dictionary entries under
        another dictionary) are dropped to `fallback` (size 0). Returns the new heads (entry -> (head,
        where its data starts)), the dropped, and each copied delta's chain depth."""
        heads: dict[int, tuple[bytes, int]] = {}
        dropped: set[int] = set()
        depths: dict[int, int] = {}
        if not special:
            return heads, dropped, depths
        pack = r.pack
        m = pack.map
        index_of = dict(zip(offs, range(len(offs))))
        verbatim = list(itertools.accumulate(sizes, initial=0))
        keys: list[int] = []
        shifts: list[int] = []

        def now_at(k: int) -> int:
            before = bisect.bisect_left(keys, k)
            return verbatim[k] + (shifts[before - 1] if before else 0)

        for k in special:
            off, change = offs[k], None
            if methods[k] == BASE and k not in forced:
                p = pack._parse(off)
                kb = index_of.get(p.base if p.base is not None else -1)
                if kb is not None and kb not in dropped:
                    head = bytes(m[off : off + 2]) + _varint(p.size) + _varint(now_at(k) - now_at(kb))
                    head += _varint(p.end - p.start)
                    heads[k] = (head, p.start)
                    depths[k] = depths.get(kb, 0) + 1
                    change = len(head) - (p.start - off)
            if change is None:
                dropped.add(k)
                change = -sizes[k]
                h = Hash(ids[pos[k]])
                self.fallback.append(PackItem(h, b"", mtimes[k], r.hints.get(h, ""), kind=KIND_NAMES[m[off]],
                                              load=functools.partial(pack.get_raw, h, pos[k])))
            sizes[k] += change
            keys.append(k)
            shifts.append((shifts[-1] if shifts else 0) + change)
        return heads, dropped, depths

    def write(self, out: Callable[[bytes | memoryview], None], progress: Callable[[int], None] | None) -> None:
        done = 0
        for pack, head, start, end, entries in self.spans:
            if head:
                out(head)
            with memoryview(pack.map) as view:
                for at in range(start, end, COPY_PIECE):
                    out(view[at : min(end, at + COPY_PIECE)])
                    release(pack.map, at, min(end, at + COPY_PIECE))
            if progress is not None and (done + entries) // 1000 > done // 1000:
                progress(done + entries)
            done += entries


def _pack_order(pack: Pack, offsets: Sequence[int], positions: Sequence[int]
                ) -> tuple[Sequence[int], Sequence[int], Sequence[int]]:
    """The entries at `positions` (of the index) in pack order: for each, by rank, its place in
    `positions`, its offset and where it ends (where the next entry of the whole pack starts: the
    entries tile the pack). One sort of every entry's offset, each tagged in its lowest bit with
    whether it is chosen, yields both the order and the ends, with no search per entry."""
    tags = bytearray(len(offsets))
    chosen = list(map(offsets.__getitem__, positions))
    for p in positions:
        tags[p] = 1
    keys = sorted(map(operator.add, map(operator.add, offsets, offsets), tags))
    keys.append(2 * pack.data_end)
    tags = bytearray(map((1).__and__, keys))
    # Compact arrays: these live through the whole plan, and a list would hold an int object per entry.
    offs = array.array("q", map(operator.rshift, itertools.compress(keys, tags), itertools.repeat(1)))
    ends = array.array("q", map(operator.rshift, itertools.compress(itertools.islice(keys, 1, None), tags),
                                itertools.repeat(1)))
    del keys
    rank = dict(zip(chosen, range(len(chosen))))
    if len(rank) != len(chosen):
        raise StorageError(f"{pack.name}: its index lists two entries at one offset; run `reel fsck`")
    return array.array("q", map(rank.__getitem__, offs)), offs, ends


def _seed(tail: tuple[int, int, Hash, Pack, int], first: int) -> _Entry:
    """The last copied entry of a name as a delta base for the fresh objects of that name (read and
    re-hashed from its old pack; it sits `first` + its offset into the new one)."""
    at, depth, h, pack, i = tail
    raw = pack.get_raw(h, i)
    entry = _Entry(PackItem(h, raw, 0))
    entry.offset, entry.depth = first + at, depth
    return entry


def _uvarint(n: int) -> bytes:
    """`_varint`, with the one- and two-byte cases (nearly every size in a pack) built directly."""
    if n < 0x80:
        return bytes((n,))
    if n < 0x4000:
        return bytes(((n & 0x7F) | 0x80, n >> 7))
    return _varint(n)


PROGRESS_EVERY_S = 0.5
"""Besides every 1000 objects, progress is reported at least this often: large objects pack slowly."""


def write_pack_stream(
    write: Callable[[bytes | memoryview], object],
    items: Iterable[PackItem],
    opts: PackOptions | None = None,
    progress: Callable[[int, int], None] | None = None,
    reuse: Sequence[Reuse] = (),
    damaged: Callable[[Hash], None] | None = None,
) -> tuple[IndexColumns, bytes, dict[str, int]]:
    """Write a whole pack through `write`: the `reuse` entries copied first, then `items` packed; returns
    the index rows (as columns, in no particular order) and the trailer (and how many entries each
    method stores).

    An entry of `reuse` whose CRC fails is reported to `damaged` (which may raise) and left out; with
    no `damaged`, StorageError. An id both copied and among `items` is copied."""
    opts = opts or PackOptions()
    copies = _Copies(reuse, damaged) if reuse else None
    hints: dict[Hash, str] = {}
    entries: list[_Entry] = []
    # Entries not copied come newest first, like a walk's order, so versions of a file sit together.
    fallback = sorted(copies.fallback, key=lambda item: -item.mtime) if copies else []
    pending = [*items, *fallback]
    # The few ids to pack are looked for among the many copied, not the other way round.
    to_pack: set[bytes] = {item.id for item in pending}
    seen = to_pack.intersection(copies.columns[0]) if copies else set()
    for item in pending:
        if item.id not in seen:
            seen.add(item.id)
            entries.append(_Entry(item))
            if item.hint:
                hints[item.id] = item.hint
    entries = _order(entries, hints)
    dict_bytes = copies.dict_bytes if copies and copies.dict_bytes is not None else _train(entries, opts.level)
    comp = _Compressor(dict_bytes, opts)
    hasher = blake3.blake3()
    buffer = bytearray()

    def out(data: bytes | memoryview) -> None:
        # Small writes gather in one buffer: a write and a hash update per entry cost more than the entry.
        if len(data) >= COPY_PIECE:
            flush()
            hasher.update(data)
            write(data)
            return
        buffer.extend(data)
        if len(buffer) >= COPY_PIECE:
            flush()

    def flush() -> None:
        if buffer:
            hasher.update(buffer)
            write(bytes(buffer))
            buffer.clear()

    copied = len(copies.columns[0]) if copies else 0
    total = copied + len(entries)
    out(PACK_HEADER.pack(PACK_MAGIC, VERSION, total, len(dict_bytes)) + dict_bytes)
    first = PACK_HEADER.size + len(dict_bytes)
    counts = dict.fromkeys(METHOD_NAMES.values(), 0)
    columns = _columns()
    if copies:
        copies.write(out, (lambda n: progress(n, total)) if progress else None)
        if progress is not None and not entries and copied % 1000:
            progress(copied, total)  # the final count, so a "done." line states the whole
        ids, at, crcs, mtimes = copies.columns
        columns = (ids, array.array("q", map(first.__add__, at)), crcs, mtimes)
        counts = dict(copies.counts)
    offset = first + (copies.size if copies else 0)
    ticked = time.monotonic()
    window: list[_Entry] = []
    group: tuple[int, str] | None = None
    # The loop runs once per object: what it calls is bound here, and headers and small writes are
    # built in place (a Python call per step costs more than the step for a small object).
    ids_add, offsets_add = columns[0].append, columns[1].append
    crcs_add, mtimes_add = columns[2].append, columns[3].append
    alone, against, crc32 = comp.alone, comp.against, zlib.crc32
    min_delta, max_depth, width = opts.min_delta, opts.depth, opts.window
    tally = dict.fromkeys(METHOD_NAMES, 0)
    for n, entry in enumerate(entries, copied):
        key = (entry.code, hints.get(entry.id, "") if hints else "")
        if key != group:
            for old in window:
                old.drop()
            group, window = key, []
            tail = copies.tails.get(key) if copies and key[1] else None
            if tail is not None:
                window = [_seed(tail, first)]
        if entry.load is not None:
            entry.loaded()
        body = entry.body
        size = len(body)
        named = bool(key[1])
        # Named objects (versions of one file) try their neighbours first and skip compressing alone
        # when a delta is already small; unnamed ones compress alone first and try one neighbour.
        method, data, base = STORED, body, None
        if not named:
            method, data = alone(body)
        if size >= min_delta and (named or method != STORED):
            for cand in reversed(window) if named else window[-1:]:
                if cand.depth >= max_depth or len(cand.body) > 4 * size + 1024:
                    continue
                delta = against(cand, body)
                if len(delta) + 4 < len(data):
                    method, data, base = BASE, delta, cand
                    if len(delta) * 32 < size:
                        break
                elif len(delta) >= size:
                    break  # nothing shared with a neighbour and nothing to squeeze: incompressible
        if named and (base is None or len(data) * 8 > size):
            alone_method, alone_data = alone(body)
            if base is None or len(alone_data) <= len(data) + 4:
                method, data, base = alone_method, alone_data, None
        if base is None:
            head = bytes((entry.code, method)) + _uvarint(size) + _uvarint(len(data))
        else:
            head = bytes((entry.code, method)) + _uvarint(size) + _uvarint(offset - base.offset) + _uvarint(len(data))
            entry.depth = base.depth + 1
        entry.offset = offset
        ids_add(entry.id)
        offsets_add(offset)
        crcs_add(crc32(data, crc32(head)))
        mtimes_add(entry.mtime)
        if len(data) < COPY_PIECE:
            buffer += head
            buffer += data
            if len(buffer) >= COPY_PIECE:
                flush()
        else:
            out(head)
            out(data)
        offset += len(head) + len(data)
        tally[method] += 1
        if size >= min_delta:
            window.append(entry)
            if len(window) > width:
                window.pop(0).drop()
        else:
            entry.zc = None
            if entry.load is not None:
                entry.body = b""
        if progress is not None and ((n + 1) % 1000 == 0 or n + 1 == total
                                     or time.monotonic() - ticked >= PROGRESS_EVERY_S):
            ticked = time.monotonic()
            progress(n + 1, total)
    for code, count in tally.items():
        counts[METHOD_NAMES[code]] += count
    flush()
    trailer = hasher.digest()
    write(trailer)
    for entry in entries:
        entry.body, entry.zc = b"", None
    return columns, trailer, counts


def write_pack(
    directory: Path,
    items: Iterable[PackItem],
    opts: PackOptions | None = None,
    *,
    fsync: bool = True,
    progress: Callable[[int, int], None] | None = None,
    reuse: Sequence[Reuse] = (),
    damaged: Callable[[Hash], None] | None = None,
) -> PackResult:
    """Write `pack-<trailer>.pack` and its `.idx` into `directory`, atomically: the index comes last,
    so a reader never sees an index whose pack is incomplete. Before either is named, the pack is read
    back from the file and checked against its trailer, and a spread of its entries is read through the
    new index (see `write_pack_stream` for `reuse`)."""
    directory.mkdir(parents=True, exist_ok=True)
    tmp_pack = temp_name(directory / "pack.pack")
    tmp_idx: Path | None = None
    try:
        with open(tmp_pack, "xb") as f:
            columns, trailer, counts = write_pack_stream(f.write, items, opts, progress, reuse, damaged)
            f.flush()
            if fsync:
                os.fsync(f.fileno())
        _check_written(tmp_pack, trailer)
        name = f"pack-{trailer.hex()}"
        pack_path, idx_path = directory / f"{name}.pack", directory / f"{name}.idx"
        count = len(columns[0])
        idx = index_parts(*columns, trailer)
        del columns  # the index's pieces replace its columns: neither is held twice
        tmp_idx = temp_name(idx_path)
        with open(tmp_idx, "xb") as f:
            f.writelines(idx)
            del idx
            if fsync:
                f.flush()
                os.fsync(f.fileno())
        _check_entries(tmp_pack, tmp_idx)
        size = tmp_pack.stat().st_size
        os.replace(tmp_pack, pack_path)
        os.replace(tmp_idx, idx_path)
    finally:
        tmp_pack.unlink(missing_ok=True)
        if tmp_idx is not None:
            tmp_idx.unlink(missing_ok=True)
    if fsync:
        fsync_dir(directory)
    return PackResult(name, pack_path, idx_path, count, trailer, size, counts)


CHECK_SAMPLE = 256
"""How many entries of a new pack are read back through its index before it is named."""


def _check_entries(pack_path: Path, idx_path: Path) -> None:
    """Read a spread of the new pack's entries through its new index (CRC, inflation, re-hash): an index
    that does not match its pack (a wrong offset while copying) is caught before the pack replaces
    anything. E007 if one fails."""
    pack = Pack(pack_path, idx_path)
    try:
        n = pack.count
        for i in sorted({*range(0, n, max(1, n // CHECK_SAMPLE)), n - 1}) if n else ():
            pack.get_raw(pack.index.id(i), i)
            pack.release_pages()  # a page fault maps its neighbours too: let go as we go
    finally:
        pack.close()


def _check_written(path: Path, trailer: bytes) -> None:
    """The file as it is on disk hashes to the trailer computed while writing it (E007 if not); read
    a piece at a time, so checking a large pack holds little of it."""
    hasher = blake3.blake3()
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        left = size - TRAILER
        while left > 0:
            piece = f.read(min(left, COPY_PIECE))
            if not piece:
                break
            hasher.update(piece)
            left -= len(piece)
        tail = f.read()
    if size < TRAILER or left or tail != trailer or hasher.digest() != trailer:
        raise StorageError(f"{path.name}: the pack read back does not match what was written")
