"""Copying the entries of verified packs into a new pack as they are stored, the way git reuses deltas:
the plan (which runs of bytes go, in their packs' order, each entry's CRC checked, deltas given their new
distance, what must be packed afresh instead) and its write. `pack_write` runs it before the fresh
objects."""

from __future__ import annotations

import array
import bisect
import collections
import functools
import itertools
import operator
import zlib
from collections.abc import Callable, Mapping, MutableSequence, Sequence
from collections.abc import Set as AbstractSet

from reelstore.backend.packs.pack import BASE, DICT, KIND_NAMES, METHOD_NAMES, ZSTD, Pack, _varint, release
from reelstore.backend.packs.pack_index import Columns
from reelstore.backend.packs.pack_item import DICT_MAX, PackItem
from reelstore.errors import StorageError
from reelstore.objects import Hash


class Reuse:
    """Entries of an open pack whose checksums were verified (`Pack.checksums_ok`), to be copied into a
    new pack as they are stored, the way git reuses deltas: `positions` in its index, with the mtime
    each is to carry. Each entry's CRC is checked as it is copied; `damaged` hears of one that fails.
    A plain class, as PackItem is (see there)."""

    def __init__(
        self,
        pack: Pack,
        positions: Sequence[int],
        mtimes: Sequence[int],
        columns: Columns | None = None,
        hints: Mapping[bytes, str] | None = None,
        versions: AbstractSet[str] = frozenset(),
    ) -> None:
        self.pack, self.positions, self.mtimes = pack, positions, mtimes
        self.columns = columns
        """The pack's `index.columns()`, if the caller has read them already."""
        self.hints: Mapping[bytes, str] = {} if hints is None else hints
        """Name hints of the ids (see PackItem), for those packed afresh."""
        self.versions = versions
        """Hints shared by several objects of the new pack (versions of one file): those of a group commit's
        pack are packed afresh, and the first copied one of each seeds the delta search of the others."""

    @functools.cached_property
    def named(self) -> AbstractSet[bytes]:
        """The ids whose hint is one of `versions`: found once (a few names among many ids)."""
        hints = self.hints
        return set(itertools.compress(hints.keys(), map(self.versions.__contains__, hints.values())))


IndexColumns = tuple[list[bytes], MutableSequence[int], MutableSequence[int], MutableSequence[int]]
"""A pack's index rows as columns: ids, offsets, CRCs, mtimes (the numbers in compact arrays)."""


def new_columns() -> IndexColumns:
    """Empty columns for index rows: ids, offsets, CRCs, mtimes."""
    return [], array.array("q"), array.array("q"), array.array("q")


COPY_PIECE = 1 << 20
"""Copied bytes are written, and their mapped pages released, this many at a time."""
CHECK_PIECE = 8192
"""Entries whose CRCs are checked in one go (their mapped pages then released)."""


class Copies:
    """The plan for the entries copied from other packs: written first, in their packs' order, so a
    copied delta still follows its base (its distance rewritten if entries between them went)."""

    def __init__(self, reuse: Sequence[Reuse], damaged: Callable[[Hash], None] | None) -> None:
        self.dict_bytes: bytes | None = next((r.pack._dict_bytes for r in reuse if r.pack._dict_bytes), None)
        self.columns: IndexColumns = new_columns()
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
    def _check(
        pack: Pack, pos: Sequence[int], offs: Sequence[int], ends: Sequence[int], crcs: Sequence[int]
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

    def _rebase(
        self,
        r: Reuse,
        special: list[int],
        forced: set[int],
        methods: Sequence[int],
        offs: Sequence[int],
        sizes: list[int],
        pos: Sequence[int],
        ids: list[bytes],
        mtimes: Sequence[int],
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
                self.fallback.append(
                    PackItem(
                        h,
                        b"",
                        mtimes[k],
                        r.hints.get(h, ""),
                        kind=KIND_NAMES[m[off]],
                        load=functools.partial(pack.get_raw, h, pos[k]),
                    )
                )
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


def _pack_order(
    pack: Pack, offsets: Sequence[int], positions: Sequence[int]
) -> tuple[Sequence[int], Sequence[int], Sequence[int]]:
    """The entries at `positions` (of the index) in pack order: for each, by rank, its place in
    `positions`, its offset and where it ends (where the next entry of the whole pack starts: the
    entries tile the pack). One sort of every entry's offset, each tagged in its lowest bit with
    whether it is chosen, yields both the order and the ends, with no search per entry."""
    tags = bytearray(len(offsets))
    chosen = list(map(offsets.__getitem__, positions))
    collections.deque(map(tags.__setitem__, positions, itertools.repeat(1)), maxlen=0)  # tags[p] = 1, in C
    keys = sorted(map(operator.add, map(operator.add, offsets, offsets), tags))
    keys.append(2 * pack.data_end)
    tags = bytearray(map((1).__and__, keys))
    # Compact arrays: these live through the whole plan, and a list would hold an int object per entry.
    offs = array.array("q", map(operator.rshift, itertools.compress(keys, tags), itertools.repeat(1)))
    ends = array.array(
        "q", map(operator.rshift, itertools.compress(itertools.islice(keys, 1, None), tags), itertools.repeat(1))
    )
    del keys
    rank = dict(zip(chosen, range(len(chosen))))
    if len(rank) != len(chosen):
        raise StorageError(f"{pack.name}: its index lists two entries at one offset; run `reel fsck`")
    return array.array("q", map(rank.__getitem__, offs)), offs, ends
