"""The disk backend's gc, repack and prune, and its own check for fsck: packs and loose files, which
nothing above the backend sees.

gc lists its candidates (every pack, its index read in bulk, its checksums verified, each entry's kind
from its first byte; every loose file with its mtime) *before* it calls the mark, so anything written
meanwhile is no candidate. What stays goes into one new pack (entries of verified packs copied as they
are stored, the rest read, re-hashed and packed afresh, versions of a file side by side); then the old
packs go, and the loose files and temporary files that are unreachable and older than the grace
period. An object is deleted only if it is unreachable and its mtime (loose file, or the mtime recorded
in the pack index) is older than the grace period, and a loose file only if its mtime has not moved
since it was listed (a writer that re-put it freshened it). The caller holds gc.lock.
"""

from __future__ import annotations

import array
import collections
import itertools
import operator
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING, cast

from reelstore.backend.packs.pack import KIND_CODES, Pack
from reelstore.backend.packs.pack_copy import Reuse
from reelstore.backend.packs.pack_item import PackItem, PackOptions, PackResult
from reelstore.backend.packs.pack_verify import verify_pack
from reelstore.backend.upkeep import GcReport, Live, Mark, Progress, PruneReport, RepackReport, StoreCheck, check
from reelstore.errors import BadInput, StorageError
from reelstore.objects.hash import Hash, as_hash

if TYPE_CHECKING:
    from reelstore.backend.disk_store import DiskObjectStore

HELD_RAW = 64 * 1024
"""An object gc must read before packing (to learn its kind) is kept in memory up to this size; every
other object is read by the pack writer when its turn comes, so gc's memory does not grow with the
store's bytes."""
TEMP_AGE = 3600
"""A temporary file older than this (seconds) is left over from a crash: no writer holds one that long."""


LEAF_CODES = frozenset(KIND_CODES[kind] for kind in ("blob", "capability", "effect"))
"""Pack codes of the kinds that reference nothing: the walk needs no more than an entry's header for them.
Named here rather than found from every kind's class, so gc does not import every kind to start (a test
checks the list against the classes)."""
_LEAF_TABLE = bytes(code in LEAF_CODES for code in range(256))
NOT = bytes([1, 0]) + bytes(254)
"""bytes.translate tables: an entry's kind code to 1 for a leaf kind; a flag of 0 or 1 to its opposite."""


class Listing:
    """One pack's index, read in bulk, and whether its checksums verify: only then are its leaves
    trusted from their headers and its entries copied as they are stored."""

    def __init__(self, pack: Pack) -> None:
        self.pack = pack
        self.columns = pack.index.columns()
        self.ids, self.offsets, _, self.mtimes = self.columns
        self.sound = pack.checksums_ok()
        self.codes = b""
        """Each entry's kind code, in index order (sound packs, once `kinds` has run)."""

    def kinds(self) -> bytes:
        """Every entry's kind code, from its first byte, read in one go (the pages read are let go at once)."""
        if self.sound and self.ids and not self.codes:
            m, offsets = self.pack.map, self.offsets
            self.codes = bytes(operator.itemgetter(*offsets)(m) if len(offsets) > 1 else (m[offsets[0]],))
            self.pack.release_pages()
        return self.codes


def list_packs(store: DiskObjectStore) -> list[Listing]:
    """Every pack's listing, the largest first: an object in several packs is copied from the first."""
    return [Listing(p) for p in sorted(store.packs(), key=lambda p: -p.count)]


def find_leaves(listed: list[Listing]) -> tuple[set[bytes], dict[bytes, tuple[Pack, int]]]:
    """The ids stored as a kind that references nothing in a verified pack (the walk counts them as reached
    unread), and where the other entries of verified packs are (the walk reads those from there)."""
    leaves: set[bytes] = set()
    direct: dict[bytes, tuple[Pack, int]] = {}
    for listing in listed:
        codes = listing.kinds()
        if not codes:
            continue
        flags = codes.translate(_LEAF_TABLE)
        leaves.update(itertools.compress(listing.ids, flags))
        for i in itertools.compress(range(len(flags)), flags.translate(NOT)):
            direct.setdefault(listing.ids[i], (listing.pack, i))
    return leaves, direct


class Reader:
    """get_raw for the walk: an object whose entry the listing found is read (and re-hashed) straight
    from it, without a search of every index; anything else, or an entry that fails, as get_raw reads it.
    What is read from elsewhere (loose objects, mostly: a few recent writes) is kept, small ones up to
    HELD_TOTAL bytes in all, for the pack writer, which would otherwise read each again."""

    def __init__(self, store: DiskObjectStore, direct: Mapping[bytes, tuple[Pack, int]]) -> None:
        self.store, self.direct = store, direct
        self.held: dict[bytes, bytes] = {}
        self._room = HELD_TOTAL

    def __call__(self, h: Hash) -> bytes:
        hit = self.direct.get(h)
        if hit is not None:
            try:
                return hit[0].read(h, hit[1])[1]
            except StorageError:
                pass  # another copy (a loose one, another pack) may be sound: get_raw looks for it
        raw = self.store.get_raw(h)
        if len(raw) <= min(HELD_RAW, self._room):
            self.held[h] = raw
            self._room -= len(raw)
        return raw


HELD_TOTAL = 4 << 20
"""Most bytes of objects the walk read from outside the verified packs that gc keeps for the writer."""


def _or(a: bytes, b: bytes) -> bytes:
    """Flags (bytes of 0 and 1) or-ed, in two C calls rather than one step per entry."""
    return (int.from_bytes(a, "big") | int.from_bytes(b, "big")).to_bytes(len(a), "big")


def _and(a: bytes, b: bytes) -> bytes:
    return (int.from_bytes(a, "big") & int.from_bytes(b, "big")).to_bytes(len(a), "big")


class Selection:
    """What gc keeps, from each pack's listing and the walk, as flags per listing rather than sets of
    every id (a few passes at C speed over each pack's ids): per verified pack, the positions to copy
    and the mtime each carries; the ids to pack afresh (loose only, or only in packs that do not
    verify); the counts, and the ids pruned.

    An id held twice (in several packs, or loose and packed: a crash between writing a pack and
    removing the loose copies, an object put again) is decided once, by its newest mtime, and copied
    from the first verified pack that has it."""

    def __init__(self, listed: list[Listing], loose: Mapping[Hash, float], w: Live, cutoff: float | None) -> None:
        """`cutoff` None keeps every object (repack, gc --prune=never)."""
        reach, inflight = w.reachable, w.inflight
        everything = cutoff is None
        self.reuse: list[tuple[Listing, Sequence[int], Sequence[int]]] = []
        """(listing, positions to copy, the mtime each carries) per verified pack."""
        self.fresh: dict[Hash, int] = {}
        """id -> mtime of each object packed afresh."""
        self.pruned: list[bytes] = []
        self.candidates = self.kept = self.young = 0
        self.loose_kept: set[bytes] = set()
        """The loose ids kept (their files go only if unchanged since listed)."""
        twice, marks, newest = _held_twice(listed, loose)
        kept_twice: set[bytes] = set()
        for h in twice:
            self.candidates += 1
            if h in reach or everything or newest[h] >= cast(float, cutoff) or h in inflight:
                kept_twice.add(h)
                self.young += h not in reach
            else:
                self.pruned.append(h)
        self.kept = len(kept_twice)
        claimed: set[bytes] = set()
        for listing, shared in zip(listed, marks):
            ids, n = listing.ids, len(listing.ids)
            reached = bytes(map(reach.__contains__, ids))
            if everything:
                keep = b"\1" * n
            else:
                keep = reached
                if max(listing.mtimes, default=0) >= cast(float, cutoff):
                    keep = _or(keep, bytes(map(cast(float, cutoff).__le__, listing.mtimes)))
                if inflight:
                    keep = _or(keep, bytes(map(inflight.__contains__, ids)))
            here: list[int] = []
            if shared:
                alone = shared.translate(NOT)
                keep, reached = _and(keep, alone), _and(reached, alone)
                pruned = _and(keep.translate(NOT), alone)
                for i in itertools.compress(range(n), shared):
                    h = ids[i]
                    if h in kept_twice and h not in claimed and listing.sound:
                        claimed.add(h)
                        here.append(i)
            else:
                pruned = keep.translate(NOT)
            self.candidates += n - (shared.count(1) if shared else 0)
            kept = keep.count(1)
            self.kept += kept
            self.young += kept - reached.count(1)
            self.pruned.extend(itertools.compress(ids, pruned))
            if listing.sound:
                # Compact arrays: a list would hold an int object per entry for the rest of the run.
                positions = array.array("q", itertools.compress(range(n), keep))
                mtimes = array.array("q", itertools.compress(listing.mtimes, keep))
                if here:
                    extra = dict(zip(positions, mtimes))
                    extra.update((i, int(newest[ids[i]])) for i in here)
                    positions = array.array("q", sorted(extra))
                    mtimes = array.array("q", map(extra.__getitem__, positions))
                self.reuse.append((listing, positions, mtimes))
            else:
                for i in itertools.compress(range(n), keep):
                    self.fresh[as_hash(ids[i])] = listing.mtimes[i]
        for h in kept_twice - claimed:
            self.fresh[as_hash(h)] = int(newest[h])
        for h, mtime in loose.items():
            if h in twice:
                if h in kept_twice:
                    self.loose_kept.add(h)
                continue
            self.candidates += 1
            if h in reach or everything or mtime >= cast(float, cutoff) or h in inflight:
                self.kept += 1
                self.young += h not in reach
                self.loose_kept.add(h)
                self.fresh[h] = int(mtime)
            else:
                self.pruned.append(h)


def _held_twice(
    listed: list[Listing], loose: Mapping[Hash, float]
) -> tuple[set[bytes], list[bytes], dict[bytes, float]]:
    """The ids held more than once (in several packs, or packed and loose); per listing, which of its
    entries are those (b"" if none); and the newest mtime of each. Only the smaller packs' ids (and the
    loose ones) are ever held in a set: the largest pack's are looked up in it."""
    twice: set[bytes] = set()
    smaller: set[bytes] = set()
    for listing in listed[1:]:
        twice.update(smaller.intersection(listing.ids))
        smaller.update(listing.ids)
    if listed:
        twice.update((smaller | loose.keys()).intersection(listed[0].ids))
    twice.update(smaller.intersection(loose))
    newest: dict[bytes, float] = {}
    marks: list[bytes] = []
    for listing in listed:
        shared = bytes(map(twice.__contains__, listing.ids)) if twice else b""
        if shared.count(1) == 0:
            shared = b""
        for i in itertools.compress(range(len(shared)), shared):
            h = listing.ids[i]
            newest[h] = max(newest.get(h, 0), listing.mtimes[i])
        marks.append(shared)
    for h in twice.intersection(loose):
        newest[h] = max(newest.get(h, 0), loose[cast(Hash, h)])
    return twice, marks, newest


def _versions(w: Live) -> set[str]:
    """Versions of a file: a name hint that several objects of one sort share (leaves, or objects the
    walk read), e.g. the blobs of one path, or the tree nodes at one place in the namespace."""
    hints = w.hints
    read = collections.Counter(map(hints.get, w.kinds))
    unread = collections.Counter(hints.values())
    unread.subtract({name: count for name, count in read.items() if name})
    return {name for group in (read, unread) for name, count in group.items() if name and count > 1}


def write_kept(
    store: DiskObjectStore,
    chosen: Selection,
    w: Live,
    skipped: list[Hash] | None,
    damaged: Callable[[Hash], None] | None,
    tick: Callable[[int, int], None] | None,
    held: Mapping[bytes, bytes],
) -> PackResult:
    """One new pack of what `chosen` keeps: entries of verified packs copied as they are stored, the rest
    (loose objects, objects of packs that do not verify) read, re-hashed and compressed afresh, one at a
    time. An object that cannot be read is left out and named in `skipped` (with no `skipped`, StorageError)."""
    hints = cast(Mapping[bytes, str], w.hints)  # keyed by Hash, looked up by the index's plain bytes
    versions = _versions(w)
    reuse = [
        Reuse(listing.pack, positions, mtimes, listing.columns, hints, versions)
        for listing, positions, mtimes in chosen.reuse
        if positions
    ]
    items: list[PackItem] = []
    # In walk order (newest history first), so each version of a file is packed beside its neighbours.
    walked = [h for h in w.kinds if h in chosen.fresh]
    for h in itertools.chain(walked, chosen.fresh.keys() - walked):
        try:
            items.append(_item(store, h, w.kinds.get(h, ""), chosen.fresh[h], w.hints.get(h, ""), held.get(h)))
        except StorageError:
            if skipped is None:
                raise
            # Unreachable, young and unreadable (gc): nothing can be packed; a loose copy stays for fsck.
            chosen.kept -= 1
            chosen.loose_kept.discard(h)
            skipped.append(h)
    return store.add_pack(items, pack_options(store.setting), progress=tick, reuse=reuse, damaged=damaged)


def _item(store: DiskObjectStore, h: Hash, kind: str, mtime: int, hint: str, raw: bytes | None) -> PackItem:
    """A pack item read by the pack writer when it gets to it, unless the walk kept its bytes (`raw`). An
    object the walk did not read is read now, to learn its kind (and, if small, kept: the unreachable
    young are few)."""
    if raw is not None:
        return PackItem(h, raw, mtime, hint)
    if not kind:
        raw = store.get_raw(h)
        if len(raw) <= HELD_RAW:
            return PackItem(h, raw, mtime, hint)
        kind = raw[: raw.index(b"\0")].decode("ascii")
    return PackItem(h, b"", mtime, hint, kind=kind, load=lambda: store.get_raw(h))


def pack_options(setting: Callable[[str], str | None]) -> PackOptions:
    """The pack writer's options from the store's config (`pack.depth`, `pack.window`,
    `pack.compression`); E014 naming the key for a value that is not an integer."""
    opts = PackOptions()
    for key, attr in (("pack.depth", "depth"), ("pack.window", "window"), ("pack.compression", "level")):
        value = setting(key)
        if value is not None:
            if not value.lstrip("-").isdigit():
                raise BadInput(f"config {key} must be an integer, not {value!r}")
            setattr(opts, attr, int(value))
    return opts


def collect(
    store: DiskObjectStore, mark: Mark, cutoff: float | None, dry_run: bool, progress: Progress | None, now: float
) -> GcReport:
    """gc: list, mark, select, pack, sweep (see the module's docstring)."""
    store.refresh(force=True)
    loose = store.loose_files()
    listed = list_packs(store)
    leaves, direct = find_leaves(listed)
    reader = Reader(store, direct)
    w = mark(leaves, reader)
    del leaves, direct  # a set of every leaf id: let go before the copy plan's columns are built
    reader.direct = {}
    chosen = Selection(listed, loose, w, cutoff)
    report = GcReport(reachable=len(w.reachable), candidates=chosen.candidates, dry_run=dry_run)
    report.kept_recent = chosen.young
    report.pruned_ids = chosen.pruned
    report.pruned = len(chosen.pruned)
    report.packed = chosen.kept
    if dry_run:
        return report

    def damaged(h: Hash) -> None:
        if h in w.reachable:
            raise StorageError(
                f"gc refused: object {h.hex()} is damaged in its pack (its entry does not "
                "match its checksum); run `reel fsck`",
                id=h,
            )
        # Unreachable and young: not packed; a loose copy, if any, stays for fsck.
        chosen.kept -= 1
        chosen.loose_kept.discard(h)
        report.damaged_skipped.append(h)

    current = None
    if len(listed) == 1 and not loose and chosen.kept == listed[0].pack.count:
        current = listed[0].pack.name
    elif chosen.kept:
        tick = (lambda n, total: progress("packing", n, total)) if progress else None
        current = write_kept(store, chosen, w, report.damaged_skipped, damaged, tick, reader.held).name
    report.packed = chosen.kept
    report.pack = current
    for listing in listed:
        if listing.pack.name != current:
            store.remove_pack(listing.pack)
            report.packs_removed += 1
    report.loose_removed = _remove_loose(store, loose, chosen.loose_kept, cutoff, progress)
    report.temp_removed = store.sweep_temp(now - TEMP_AGE)
    store.refresh(force=True)
    return report


def _remove_loose(
    store: DiskObjectStore,
    loose: Mapping[Hash, float],
    kept: AbstractSet[bytes],
    cutoff: float | None,
    progress: Progress | None,
) -> int:
    """Remove each listed loose file not changed since it was listed: one `kept` (now packed) whatever
    its age, any other only if older than `cutoff`. How many went."""
    removed = 0
    for n, (h, listed_mtime) in enumerate(loose.items(), 1):
        if store.remove_if_unchanged(h, listed_mtime, None if h in kept else cutoff):
            removed += 1
        if progress is not None and (n % 1000 == 0 or n == len(loose)):
            progress("removing loose objects", n, len(loose))
    return removed


def repack(
    store: DiskObjectStore, mark: Mark, all_objects: bool, delete: bool, progress: Progress | None
) -> RepackReport:
    """Pack the loose objects (with `all_objects`, every object, into one pack); with `delete`, remove the
    loose copies now packed and (with `all_objects`) the old packs. Nothing is dropped: `mark` only
    tells the kinds and names that place versions of a file side by side."""
    report = RepackReport()
    store.refresh(force=True)
    loose = store.loose_files()
    every = list_packs(store)
    listed = every if all_objects else []
    if not loose and not any(listing.ids for listing in listed):
        return report
    leaves, direct = find_leaves(every)
    reader = Reader(store, direct)
    w = mark(leaves, reader)
    tick = (lambda n, total: progress("packing", n, total)) if progress else None
    result = write_kept(store, Selection(listed, loose, w, None), w, None, None, tick, reader.held)
    report.pack, report.packed, report.methods = result.name, result.count, result.methods
    if delete:
        for listing in listed:
            if listing.pack.name != result.name:
                store.remove_pack(listing.pack)
                report.packs_removed += 1
        report.loose_removed = _remove_loose(store, loose, loose.keys(), None, progress)
    store.refresh(force=True)
    return report


def prune(store: DiskObjectStore, mark: Mark, cutoff: float | None, dry_run: bool) -> PruneReport:
    """Delete unreachable loose objects older than `cutoff` (None: none); packs are untouched."""
    report = PruneReport(dry_run=dry_run)
    loose = store.loose_files()
    w = mark(None, None)
    for h, listed in sorted(loose.items()):
        if h in w.reachable:
            continue
        if cutoff is None or listed >= cutoff or h in w.inflight:
            report.kept_recent += 1
        elif dry_run or store.remove_if_unchanged(h, listed, cutoff):
            report.removed.append(h)
    return report


def check_store(store: DiskObjectStore, full: bool, progress: Progress | None) -> StoreCheck:
    """fsck's look at the files: unusable pack files, every pack verified entry by entry (with `full`),
    every loose object read from its own file, re-hashed and decoded, and damaged journal segments."""
    store.refresh(force=True)
    problems = [f"{name}: {why}" for name, why in sorted(store.problems().items())]
    packs = store.packs()
    ids: set[Hash] = set()
    packed = 0
    for n, pack in enumerate(packs):
        if full:
            if progress is not None:
                progress("verifying packs", n, len(packs))
            problems.extend(verify_pack(pack)[1])
            if progress is not None:
                progress("verifying packs", n + 1, len(packs))
        ids.update(pack.ids())
        packed += pack.count
    found = check(store.loose, store.loose, progress)
    found.ids |= ids
    found.packs, found.packed = len(packs), packed
    found.problems[:0] = problems
    found.problems += store.segments.problems()
    return found
