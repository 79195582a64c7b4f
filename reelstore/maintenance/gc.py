"""Garbage collection, prune and repack: mark from refs and young reflog entries, pack what stays,
delete what is unreachable and older than the grace period.

Safety beside concurrent writers rests on three rules, as in git: candidates are listed *before* the
mark, so anything written during gc is not a candidate; an object is deleted only if it is unreachable
and its mtime (loose file, or the mtime recorded in the pack index) is older than the grace period; and
a loose file is removed only if its mtime has not moved since it was listed (a writer that re-put it
freshened it). A writer must re-put an old object it starts to reference; with `--prune=now` there is no
grace period, and a concurrent writer can lose such an object, exactly as with `git gc --prune=now`.
"""

from __future__ import annotations

import array
import collections
import functools
import gc as pygc
import itertools
import operator
import os
import re
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from contextlib import contextmanager
from typing import Any, cast

from reelstore.errors import BadInput, Conflict, StorageError
from reelstore.maintenance.reach import Walk, ref_roots, walk
from reelstore.objects import Hash
from reelstore.storage.object_store import ObjectStore
from reelstore.storage.pack import KIND_CODES, Pack
from reelstore.storage.pack_copy import Reuse
from reelstore.storage.pack_item import PackItem, PackOptions, PackResult
from reelstore.storage.repo import Repo

HELD_RAW = 64 * 1024
"""An object gc must read before packing (to learn its kind) is kept in memory up to this size; every
other object is read by the pack writer when its turn comes, so gc's memory does not grow with the
store's bytes."""
DEFAULT_PRUNE_EXPIRE = "2.weeks.ago"
DEFAULT_REFLOG_EXPIRE = "90.days.ago"
LOCK_NAME = "gc.lock"

_as_hash = functools.partial(bytes.__new__, Hash)
"""Hash of 32 bytes already known to be an id (from an index), without the length check."""

Progress = Callable[[str, int, int | None], None]

_UNITS = {
    "s": 1, "sec": 1, "secs": 1, "second": 1, "seconds": 1,
    "m": 60, "min": 60, "mins": 60, "minute": 60, "minutes": 60,
    "h": 3600, "hour": 3600, "hours": 3600,
    "d": 86400, "day": 86400, "days": 86400,
    "w": 604800, "week": 604800, "weeks": 604800,
    "month": 2592000, "months": 2592000,
    "y": 31536000, "year": 31536000, "years": 31536000,
}
_RELATIVE = r"^(\d+)\s*[._ ]?\s*([a-z]+)(?:[._ ]+ago)?$"
"""A count and a unit; compiled (and cached by `re`) only when an age other than now or never is read."""


def parse_age(text: str, now: float | None = None) -> float | None:
    """The cutoff time (epoch seconds) AGE names; None for `never`. E014 if AGE is not understood.

    Forms: `now`, `never`, a count and unit (`2.weeks.ago`, `30.minutes`, `1h`, `90 days ago`; units
    s, m/min, h, d, w, month = 30 days, y = 365 days), or an ISO 8601 time (UTC unless it says otherwise).
    """
    now = time.time() if now is None else now
    t = text.strip().lower()
    if t == "now":
        return now
    if t == "never":
        return None
    m = re.match(_RELATIVE, t)
    if m and m.group(2) in _UNITS:
        return now - int(m.group(1)) * _UNITS[m.group(2)]
    from datetime import datetime, timezone  # only for an ISO time

    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise BadInput(f"cannot read {text!r} as an age: use now, never, 2.weeks.ago, 30.minutes, 1h or "
                       "an ISO time") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.timestamp()


def config_cutoff(repo: Repo, key: str, default: str, now: float) -> float | None:
    return parse_age(repo.config.get(key, default) or default, now)


@contextmanager
def gc_lock(repo: Repo, wait_s: float = 0.0) -> Iterator[None]:
    """Hold `.reel/gc.lock`. A lock left by a dead process on this host is taken over; a live one makes
    us wait up to `wait_s`, then fail with E002."""
    me = f"{os.getpid()} {_host()} {int(time.time())}\n".encode()
    deadline = time.monotonic() + wait_s
    while not repo.files.create(LOCK_NAME, me):
        owner = _lock_owner(repo.files.read(LOCK_NAME))
        if owner is None:
            repo.files.remove(LOCK_NAME)
            continue
        if time.monotonic() >= deadline:
            where = repo.files.where(LOCK_NAME)
            raise Conflict(f"another gc is running ({owner}); wait for it, or remove {where} if it is not",
                           path=where) from None
        time.sleep(0.05)
    try:
        yield
    finally:
        repo.files.remove(LOCK_NAME)


@contextmanager
def _no_cycle_collection() -> Iterator[None]:
    """Python's cycle collector paused for the duration: a gc holds a few hundred thousand small
    objects (ids, columns), which every full collection would walk again, for nothing to collect."""
    was = pygc.isenabled()
    pygc.disable()
    try:
        yield
    finally:
        if was:
            pygc.enable()


def _host() -> str:
    """This host's name, as socket.gethostname() gives it (both read uname), without importing socket."""
    return os.uname().nodename


def _lock_owner(content: bytes | None) -> str | None:
    """A description of the live holder of the lock, or None if its holder is dead (stale lock)."""
    if content is None:
        return "a process that just released it"
    parts = content.decode("utf-8", "replace").split()
    if len(parts) >= 2 and parts[0].isdigit() and parts[1] == _host():
        try:
            os.kill(int(parts[0]), 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass
    return f"pid {parts[0]} on {parts[1]}" if len(parts) >= 2 else "unknown holder"


class GcReport:
    """What a gc found and did. A plain class with a dataclass's constructor, repr and equality, not a
    dataclass: `reel gc` otherwise never imports `dataclasses`, whose import and class creation cost more
    than a small store's gc."""

    def __init__(self, reachable: int = 0, candidates: int = 0, kept_recent: int = 0, pruned: int = 0,
                 packed: int = 0, pack: str | None = None, packs_removed: int = 0, loose_removed: int = 0,
                 temp_removed: int = 0, dry_run: bool = False, damaged_skipped: list[Hash] | None = None) -> None:
        self.reachable = reachable
        self.candidates = candidates
        self.kept_recent = kept_recent
        """Unreachable but younger than the grace period: kept (and packed, with their mtimes)."""
        self.pruned = pruned
        """Unreachable and old: gone (or, with dry_run, would be)."""
        self.packed = packed
        self.pack = pack
        self.packs_removed = packs_removed
        self.loose_removed = loose_removed
        self.temp_removed = temp_removed
        """Temporary files left by a killed writer (older than an hour)."""
        self.dry_run = dry_run
        self.damaged_skipped: list[Hash] = [] if damaged_skipped is None else damaged_skipped
        """Unreachable young objects that could not be read, so not packed (fsck names them)."""
        self._pruned: Collection[bytes] = []

    def __repr__(self) -> str:
        return f"GcReport({', '.join(f'{k}={v!r}' for k, v in self.to_json().items())})"

    def __eq__(self, other: object) -> bool:
        return type(other) is GcReport and self.to_json() == other.to_json()

    __hash__ = None  # type: ignore[assignment]  # mutable, so unhashable, as a dataclass with eq is

    @property
    def pruned_ids(self) -> list[Hash]:
        """The ids pruned (with dry_run, to be), sorted: built when first asked for, since a large gc's
        report is mostly read for its counts."""
        if not isinstance(self._pruned, list):
            self._pruned = sorted(map(_as_hash, self._pruned))
        return list(self._pruned)

    @pruned_ids.setter
    def pruned_ids(self, ids: Collection[bytes]) -> None:
        self._pruned = ids

    def to_json(self) -> dict[str, Any]:
        doc = {k: v for k, v in self.__dict__.items() if k not in ("_pruned", "damaged_skipped")}
        doc["pruned_ids"] = [h.hex() for h in self.pruned_ids]
        doc["damaged_skipped"] = [h.hex() for h in self.damaged_skipped]
        return doc


def _require_complete(w: Walk, what: str) -> None:
    if w.complete:
        return
    bad = [f"missing {h.hex()} (from {via})" for h, via in list(w.missing.items())[:5]]
    bad += [f"damaged {h.hex()}: {msg}" for h, msg in list(w.damaged.items())[:5]]
    raise StorageError(f"{what} refused: the reachable set is incomplete ({'; '.join(bad)}); run `reel fsck`",
                       missing=len(w.missing), damaged=len(w.damaged))


def _mark(repo: Repo, now: float, progress: Progress | None, leaves: AbstractSet[bytes] | None = None,
          read: Callable[[Hash], bytes] | None = None) -> Walk:
    """Everything reachable from the refs and young reflog entries, then the fence (see `_fence`)."""
    since = config_cutoff(repo, "gc.reflogExpire", DEFAULT_REFLOG_EXPIRE, now)
    since_ms = 0 if since is None else int(since * 1000)
    tick = (lambda n: progress("marking", n, None)) if progress else None
    roots = ref_roots(repo.refs, since_ms)
    w = walk(repo.objects, roots, progress=tick, leaves=leaves, read=read)
    _fence(repo, w, roots, since_ms, leaves, read)
    return w


FENCE_ROUNDS = 3


def _fence(repo: Repo, w: Walk, roots: list[tuple[str, Hash]], since_ms: int,
           leaves: AbstractSet[bytes] | None, read: Callable[[Hash], bytes] | None = None) -> None:
    """After marking, add what concurrent writers may reference next: every id a live writer registered
    and has not yet referenced from a landed ref transaction (storage/inflight.py), then the refs as they
    are now. One round suffices for a writer that registers: if gc reads its registration before it
    settles, its objects are kept; if after, its ref move landed before gc re-reads the refs. So an
    object listed as a candidate before the mark and unreachable after the fence is not about to be
    referenced by a write that began before the listing. Up to FENCE_ROUNDS rounds are read until two
    readings of the refs agree, which also catches an object moving between two refs mid-reading for a
    writer that does not register."""
    before = roots
    for _ in range(FENCE_ROUNDS):
        protected = repo.objects.protected()
        now = ref_roots(repo.refs, since_ms)
        if not any(map(_unknown(w), itertools.chain((h for _, h in now), protected))):
            # Nothing new since the mark (the usual case): no walk, and no copy of the reached set.
            if now == before:
                return
            before = now
            continue
        done = w.reachable | w.inflight | set(w.missing) | set(w.damaged)
        moved = walk(repo.objects, [(n, h) for n, h in now if h not in done], known=done, leaves=leaves, read=read)
        done |= moved.reachable | set(moved.missing) | set(moved.damaged)
        pending = walk(repo.objects, [("an in-flight write", h) for h in protected - done], known=done,
                       leaves=leaves, read=read)
        # An in-flight write may not be on disk yet (or ever, if its writer fails), or be caught between
        # its pack's rename and its index's (then it reads as unusable, not absent): what its walk misses
        # is not damage; what it reaches is kept. Real damage is fsck's to name.
        pending.missing.clear()
        pending.damaged.clear()
        w.inflight |= pending.reachable
        for more in (moved, pending):
            if more is moved:
                w.reachable |= more.reachable
            w.kinds.update(more.kinds)
            w.damaged.update(more.damaged)
            w.missing.update(more.missing)
            for h, name in more.hints.items():
                w.hints.setdefault(h, name)
        if now == before:
            return
        before = now


def _unknown(w: Walk) -> Callable[[bytes], bool]:
    """Whether an id is not yet reached, kept in flight, missing or damaged in `w`."""
    return lambda h: not (h in w.reachable or h in w.inflight or h in w.missing or h in w.damaged)


TEMP_AGE = 3600
"""A temporary file older than this (seconds) is left over from a crash: no writer holds one that long."""


def gc(
    repo: Repo,
    prune: str | None = None,
    *,
    dry_run: bool = False,
    progress: Progress | None = None,
    wait_s: float = 0.0,
    now: float | None = None,
) -> GcReport:
    """Mark, keep the young unreachable, pack the rest into one pack, delete the old unreachable.

    `prune` is an AGE (`now`, `2.weeks.ago`, `never`…); None reads `gc.pruneExpire` (default two weeks).
    """
    now = time.time() if now is None else now
    cutoff = parse_age(prune, now) if prune is not None else config_cutoff(
        repo, "gc.pruneExpire", DEFAULT_PRUNE_EXPIRE, now)
    store = repo.objects
    if not store.keeps_files:
        return _gc_memory(repo, cutoff, dry_run, now)
    with gc_lock(repo, wait_s), _no_cycle_collection():
        store.refresh(force=True)
        loose = store.loose_files()
        listed = _list_packs(store)
        leaves, direct = _leaves(listed)
        reader = _Reader(store, direct)
        w = _mark(repo, now, progress, leaves, reader)
        del leaves, direct  # a set of every leaf id: let go before the copy plan's columns are built
        reader.direct = {}
        _require_complete(w, "gc")
        chosen = _Selection(listed, loose, w, cutoff)
        report = GcReport(reachable=len(w.reachable), candidates=chosen.candidates, dry_run=dry_run)
        report.kept_recent = chosen.young
        report.pruned_ids = chosen.pruned
        report.pruned = len(chosen.pruned)
        report.packed = chosen.kept
        if dry_run:
            return report

        def damaged(h: Hash) -> None:
            if h in w.reachable:
                raise StorageError(f"gc refused: object {h.hex()} is damaged in its pack (its entry does not "
                                   "match its checksum); run `reel fsck`", id=h)
            # Unreachable and young: not packed; a loose copy, if any, stays for fsck.
            chosen.kept -= 1
            chosen.loose_kept.discard(h)
            report.damaged_skipped.append(h)

        current = None
        if len(listed) == 1 and not loose and chosen.kept == listed[0].pack.count:
            current = listed[0].pack.name
        elif chosen.kept:
            tick = (lambda n, total: progress("packing", n, total)) if progress else None
            current = _write_kept(store, repo, chosen, w, report.damaged_skipped, damaged, tick, reader.held).name
        report.packed = chosen.kept
        report.pack = current
        for listing in listed:
            if listing.pack.name != current:
                store.remove_pack(listing.pack)
                report.packs_removed += 1
        for n, (h, listed_mtime) in enumerate(loose.items(), 1):
            kept = h in chosen.loose_kept
            if store.remove_if_unchanged(h, listed_mtime, None if kept else cutoff):
                report.loose_removed += 1
            if progress is not None and (n % 1000 == 0 or n == len(loose)):
                progress("removing loose objects", n, len(loose))
        report.temp_removed = store.sweep_temp(now - TEMP_AGE)
        store.refresh(force=True)
        return report


LEAF_CODES = frozenset(KIND_CODES[kind] for kind in ("blob", "capability", "effect"))
"""Pack codes of the kinds that reference nothing: the walk needs no more than an entry's header for them.
Named here rather than found from every kind's class, so gc does not import every kind to start (a test
checks the list against the classes)."""
_LEAF_TABLE = bytes(code in LEAF_CODES for code in range(256))
_NOT = bytes([1, 0]) + bytes(254)
"""bytes.translate tables: an entry's kind code to 1 for a leaf kind; a flag of 0 or 1 to its opposite."""


def _or(a: bytes, b: bytes) -> bytes:
    """Flags (bytes of 0 and 1) or-ed, in two C calls rather than one step per entry."""
    return (int.from_bytes(a, "big") | int.from_bytes(b, "big")).to_bytes(len(a), "big")


def _and(a: bytes, b: bytes) -> bytes:
    return (int.from_bytes(a, "big") & int.from_bytes(b, "big")).to_bytes(len(a), "big")


class _Listing:
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


def _list_packs(store: ObjectStore) -> list[_Listing]:
    """Every pack's listing, the largest first: an object in several packs is copied from the first."""
    return [_Listing(p) for p in sorted(store.packs(), key=lambda p: -p.count)]


def _leaves(listed: list[_Listing]) -> tuple[set[bytes], dict[bytes, tuple[Pack, int]]]:
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
        for i in itertools.compress(range(len(flags)), flags.translate(_NOT)):
            direct.setdefault(listing.ids[i], (listing.pack, i))
    return leaves, direct


class _Reader:
    """get_raw for the walk: an object whose entry the listing found is read (and re-hashed) straight
    from it, without a search of every index; anything else, or an entry that fails, as get_raw reads it.
    What is read from elsewhere (loose objects, mostly: a few recent writes) is kept, small ones up to
    HELD_TOTAL bytes in all, for the pack writer, which would otherwise read each again."""

    def __init__(self, store: ObjectStore, direct: Mapping[bytes, tuple[Pack, int]]) -> None:
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


class _Selection:
    """What gc keeps, from each pack's listing and the walk, as flags per listing rather than sets of
    every id (a few passes at C speed over each pack's ids): per verified pack, the positions to copy
    and the mtime each carries; the ids to pack afresh (loose only, or only in packs that do not
    verify); the counts, and the ids pruned.

    An id held twice (in several packs, or loose and packed: a crash between writing a pack and
    removing the loose copies, an object put again) is decided once, by its newest mtime, and copied
    from the first verified pack that has it."""

    def __init__(self, listed: list[_Listing], loose: Mapping[Hash, float], w: Walk, cutoff: float | None,
                 keep_all: bool = False) -> None:
        reach, inflight = w.reachable, w.inflight
        everything = keep_all or cutoff is None
        self.reuse: list[tuple[_Listing, Sequence[int], Sequence[int]]] = []
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
                alone = shared.translate(_NOT)
                keep, reached = _and(keep, alone), _and(reached, alone)
                pruned = _and(keep.translate(_NOT), alone)
                for i in itertools.compress(range(n), shared):
                    h = ids[i]
                    if h in kept_twice and h not in claimed and listing.sound:
                        claimed.add(h)
                        here.append(i)
            else:
                pruned = keep.translate(_NOT)
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
                    self.fresh[_as_hash(ids[i])] = listing.mtimes[i]
        for h in kept_twice - claimed:
            self.fresh[_as_hash(h)] = int(newest[h])
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


def _held_twice(listed: list[_Listing], loose: Mapping[Hash, float]
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


def _versions(w: Walk) -> set[str]:
    """Versions of a file: a name hint that several objects of one sort share (leaves, or objects the
    walk read), e.g. the blobs of one path, or the tree nodes at one place in the namespace."""
    hints = w.hints
    read = collections.Counter(map(hints.get, w.kinds))
    unread = collections.Counter(hints.values())
    unread.subtract({name: count for name, count in read.items() if name})
    return {name for group in (read, unread) for name, count in group.items() if name and count > 1}


def _write_kept(store: ObjectStore, repo: Repo, chosen: _Selection, w: Walk, skipped: list[Hash] | None,
                damaged: Callable[[Hash], None] | None, tick: Callable[[int, int], None] | None,
                held: Mapping[bytes, bytes]) -> PackResult:
    """One new pack of what `chosen` keeps: entries of verified packs copied as they are stored, the rest
    (loose objects, objects of packs that do not verify) read, re-hashed and compressed afresh, one at a
    time. An object that cannot be read is left out and named in `skipped` (with no `skipped`, StorageError)."""
    hints = cast(Mapping[bytes, str], w.hints)  # keyed by Hash, looked up by the index's plain bytes
    versions = _versions(w)
    reuse = [Reuse(listing.pack, positions, mtimes, listing.columns, hints, versions)
             for listing, positions, mtimes in chosen.reuse if positions]
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
    return store.add_pack(items, _pack_options(repo), progress=tick, reuse=reuse, damaged=damaged)


def _gc_memory(repo: Repo, cutoff: float | None, dry_run: bool, now: float) -> GcReport:
    """An in-memory store keeps no mtimes: every unreachable object counts as old."""
    w = _mark(repo, now, None, None)
    _require_complete(w, "gc")
    store = repo.objects
    everything = set(store)
    report = GcReport(reachable=len(w.reachable), candidates=len(everything), dry_run=dry_run)
    drop = sorted(everything - w.reachable) if cutoff is not None else []
    report.pruned, report.pruned_ids, report.packed = len(drop), drop, len(everything) - len(drop)
    report.kept_recent = len(everything - w.reachable) - len(drop)
    if not dry_run:
        for h in drop:
            store.delete(h)
    return report


def _item(store: ObjectStore, h: Hash, kind: str, mtime: int, hint: str, raw: bytes | None) -> PackItem:
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


def _pack_options(repo: Repo) -> PackOptions:
    opts = PackOptions()
    for key, attr in (("pack.depth", "depth"), ("pack.window", "window"), ("pack.compression", "level")):
        value = repo.config.get(key)
        if value is not None:
            if not value.lstrip("-").isdigit():
                raise BadInput(f"config {key} must be an integer, not {value!r}")
            setattr(opts, attr, int(value))
    return opts


def _disk(repo: Repo) -> ObjectStore:
    if not repo.objects.keeps_files:
        raise BadInput("this command needs an on-disk store")
    return repo.objects


class PruneReport:
    def __init__(self, dry_run: bool = False) -> None:
        self.removed: list[Hash] = []
        self.kept_recent = 0
        self.dry_run = dry_run


def prune(repo: Repo, expire: str | None = None, *, dry_run: bool = False, now: float | None = None) -> PruneReport:
    """Delete unreachable loose objects older than `expire` (default gc.pruneExpire). Packs are untouched."""
    now = time.time() if now is None else now
    cutoff = parse_age(expire, now) if expire is not None else config_cutoff(
        repo, "gc.pruneExpire", DEFAULT_PRUNE_EXPIRE, now)
    store = _disk(repo)
    report = PruneReport(dry_run=dry_run)
    with gc_lock(repo):
        loose = store.loose_files()
        w = _mark(repo, now, None, None)
        _require_complete(w, "prune")
        for h, listed in sorted(loose.items()):
            if h in w.reachable:
                continue
            if cutoff is None or listed >= cutoff or h in w.inflight:
                report.kept_recent += 1
            elif dry_run or store.remove_if_unchanged(h, listed, cutoff):
                report.removed.append(h)
    return report


class RepackReport:
    """What a repack did (as JSON, its attributes)."""

    def __init__(self) -> None:
        self.pack: str | None = None
        self.packed = 0
        self.packs_removed = 0
        self.loose_removed = 0
        self.methods: dict[str, int] = {}


def repack(
    repo: Repo, *, all_objects: bool = False, delete: bool = False, progress: Progress | None = None
) -> RepackReport:
    """Pack the loose objects (with `all_objects`, every object, into one pack); with `delete`, remove the
    loose copies now packed and (with `all_objects`) the old packs. Nothing unreachable is dropped."""
    store = _disk(repo)
    report = RepackReport()
    with gc_lock(repo), _no_cycle_collection():
        store.refresh(force=True)
        loose = store.loose_files()
        every = _list_packs(store)
        listed = every if all_objects else []
        if not loose and not any(listing.ids for listing in listed):
            return report
        count = (lambda n: progress("counting objects", n, None)) if progress else None
        leaves, direct = _leaves(every)
        reader = _Reader(store, direct)
        w = walk(store, ref_roots(repo.refs, None), progress=count, leaves=leaves, read=reader)
        tick = (lambda n, total: progress("packing", n, total)) if progress else None
        result = _write_kept(store, repo, _Selection(listed, loose, w, None, keep_all=True), w, None, None, tick,
                             reader.held)
        report.pack, report.packed, report.methods = result.name, result.count, result.methods
        if delete:
            for listing in listed:
                if listing.pack.name != result.name:
                    store.remove_pack(listing.pack)
                    report.packs_removed += 1
            for n, (h, listed_mtime) in enumerate(loose.items(), 1):
                if store.remove_if_unchanged(h, listed_mtime, None):
                    report.loose_removed += 1
                if progress is not None and (n % 1000 == 0 or n == len(loose)):
                    progress("removing loose objects", n, len(loose))
        store.refresh(force=True)
    return report
