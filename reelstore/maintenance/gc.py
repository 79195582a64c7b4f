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

import collections
import functools
import gc as pygc
import itertools
import operator
import os
import re
import shutil
import socket
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from collections.abc import Set as AbstractSet
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, cast

from reelstore.errors import BadInput, Conflict, StorageError
from reelstore.maintenance.reach import Walk, ref_roots, walk
from reelstore.objects import KINDS, Hash, Object
from reelstore.storage.disk_store import DiskObjectStore
from reelstore.storage.inflight import Inflight
from reelstore.storage.object_store import MemoryObjectStore
from reelstore.storage.pack import KIND_CODES, Pack
from reelstore.storage.pack_write import PackItem, PackOptions, PackResult, Reuse
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
_RELATIVE = re.compile(r"^(\d+)\s*[._ ]?\s*([a-z]+)(?:[._ ]+ago)?$")


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
    m = _RELATIVE.match(t)
    if m and m.group(2) in _UNITS:
        return now - int(m.group(1)) * _UNITS[m.group(2)]
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
    me = f"{os.getpid()} {socket.gethostname()} {int(time.time())}\n".encode()
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


def _lock_owner(content: bytes | None) -> str | None:
    """A description of the live holder of the lock, or None if its holder is dead (stale lock)."""
    if content is None:
        return "a process that just released it"
    parts = content.decode("utf-8", "replace").split()
    if len(parts) >= 2 and parts[0].isdigit() and parts[1] == socket.gethostname():
        try:
            os.kill(int(parts[0]), 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass
    return f"pid {parts[0]} on {parts[1]}" if len(parts) >= 2 else "unknown holder"


@dataclass
class GcReport:
    reachable: int = 0
    candidates: int = 0
    kept_recent: int = 0
    """Unreachable but younger than the grace period: kept (and packed, with their mtimes)."""
    pruned: int = 0
    """Unreachable and old: gone (or, with dry_run, would be)."""
    packed: int = 0
    pack: str | None = None
    packs_removed: int = 0
    loose_removed: int = 0
    temp_removed: int = 0
    """Temporary files left by a killed writer (older than an hour)."""
    dry_run: bool = False
    damaged_skipped: list[Hash] = field(default_factory=list)
    """Unreachable young objects that could not be read, so not packed (fsck names them)."""
    _pruned: Collection[bytes] = field(default_factory=list, repr=False)

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


def _mark(repo: Repo, now: float, progress: Progress | None, leaves: AbstractSet[bytes] | None = None) -> Walk:
    """Everything reachable from the refs and young reflog entries, then the fence (see `_fence`)."""
    since = config_cutoff(repo, "gc.reflogExpire", DEFAULT_REFLOG_EXPIRE, now)
    since_ms = 0 if since is None else int(since * 1000)
    tick = (lambda n: progress("marking", n, None)) if progress else None
    roots = ref_roots(repo.refs, since_ms)
    w = walk(repo.objects, roots, progress=tick, leaves=leaves)
    _fence(repo, w, roots, since_ms, leaves)
    return w


FENCE_ROUNDS = 3


def _fence(repo: Repo, w: Walk, roots: list[tuple[str, Hash]], since_ms: int,
           leaves: AbstractSet[bytes] | None) -> None:
    """After marking, add what concurrent writers may reference next: every id a live writer registered
    and has not yet referenced from a landed ref transaction (storage/inflight.py), then the refs as they
    are now. One round suffices for a writer that registers: if gc reads its registration before it
    settles, its objects are kept; if after, its ref move landed before gc re-reads the refs. So an
    object listed as a candidate before the mark and unreachable after the fence is not about to be
    referenced by a write that began before the listing. Up to FENCE_ROUNDS rounds are read until two
    readings of the refs agree, which also catches an object moving between two refs mid-reading for a
    writer that does not register."""
    inflight = getattr(repo.objects, "inflight", None)
    before = roots
    for _ in range(FENCE_ROUNDS):
        protected = inflight.protected() if isinstance(inflight, Inflight) else set()
        now = ref_roots(repo.refs, since_ms)
        done = w.reachable | w.inflight | set(w.missing) | set(w.damaged)
        moved = walk(repo.objects, [(n, h) for n, h in now if h not in done], known=done, leaves=leaves)
        done |= moved.reachable | set(moved.missing) | set(moved.damaged)
        pending = walk(repo.objects, [("an in-flight write", h) for h in protected - done], known=done,
                       leaves=leaves)
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


def _loose_listing(store: DiskObjectStore) -> dict[Hash, float]:
    return {h: mtime for h, (_, mtime) in store.loose_files().items()}


def _remove_loose_if_unchanged(store: DiskObjectStore, h: Hash, listed: float, older_than: float | None) -> bool:
    path = store.loose_path(h)
    try:
        mtime = os.stat(path).st_mtime
    except FileNotFoundError:
        return False
    if mtime > listed or (older_than is not None and mtime >= older_than):
        return False
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    return True


TEMP_AGE = 3600
"""A temporary file older than this (seconds) is left over from a crash: no writer holds one that long."""


def _sweep_temp(store: DiskObjectStore, now: float) -> int:
    """Delete `.tmp-*` files a killed writer left in objects/XX/ or objects/pack/, and staging
    directories a killed fetch left in objects/; returns how many."""
    removed = 0
    dirs = [store.pack_dir] + [Path(e.path) for e in os.scandir(store.root) if len(e.name) == 2 and e.is_dir()]
    for d in dirs:
        try:
            entries = list(os.scandir(d))
        except FileNotFoundError:
            continue
        for entry in entries:
            try:
                if entry.name.startswith(".tmp-") and entry.stat().st_mtime < now - TEMP_AGE:
                    os.unlink(entry.path)
                    removed += 1
            except FileNotFoundError:
                continue
    for entry in os.scandir(store.root):
        # A fetch stages large objects in objects/.tmp-fetch-*/ and removes it when done; a killed one
        # leaves it behind.
        try:
            if entry.name.startswith(".tmp-fetch-") and entry.is_dir() and entry.stat().st_mtime < now - TEMP_AGE:
                shutil.rmtree(entry.path, ignore_errors=True)
                removed += 1
        except FileNotFoundError:
            continue
    return removed


def _remove_pack(path: Path) -> None:
    path.with_suffix(".idx").unlink(missing_ok=True)
    path.unlink(missing_ok=True)


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
    if isinstance(store, MemoryObjectStore):
        return _gc_memory(repo, cutoff, dry_run, now)
    if not isinstance(store, DiskObjectStore):
        raise BadInput(f"gc does not know how to collect a {type(store).__name__}")
    with gc_lock(repo, wait_s), _no_cycle_collection():
        store.refresh(force=True)
        loose = _loose_listing(store)
        listed = _list_packs(store)
        packed = _Packed(listed)
        w = _mark(repo, now, progress, _leaves(listed))
        _require_complete(w, "gc")
        cands = packed.ids
        cands.update(loose)
        report = GcReport(reachable=len(w.reachable), candidates=len(cands), dry_run=dry_run)
        keep = cands & w.reachable
        rest = cands  # from here on, the candidates not reached (one set of all ids fewer)
        rest -= w.reachable
        if cutoff is None:
            young = rest
        else:
            young = rest & w.inflight
            for listing in listed:
                young |= rest.intersection(itertools.compress(listing.ids, map(cutoff.__le__, listing.mtimes)))
            young |= {h for h, t in loose.items() if t >= cutoff and h in rest}
        keep |= young
        report.kept_recent = len(young)
        report.pruned_ids = rest - young
        report.pruned = len(rest) - len(young)
        report.packed = len(keep)
        if dry_run:
            return report

        def damaged(h: Hash) -> None:
            if h in w.reachable:
                raise StorageError(f"gc refused: object {h.hex()} is damaged in its pack (its entry does not "
                                   "match its checksum); run `reel fsck`", id=h)
            # Unreachable and young: not packed; a loose copy, if any, stays for fsck.
            keep.discard(h)
            report.damaged_skipped.append(h)

        current = None
        if len(listed) == 1 and not loose and len(keep) == listed[0].pack.count:
            current = listed[0].pack.name
        elif keep:
            tick = (lambda n, total: progress("packing", n, total)) if progress else None
            current = _write_kept(store, repo, listed, keep, packed, loose, w, report.damaged_skipped, damaged,
                                  tick).name
        report.packed = len(keep)
        report.pack = current
        for listing in listed:
            if listing.pack.name != current:
                _remove_pack(listing.pack.path)
                report.packs_removed += 1
        for n, (h, listed_mtime) in enumerate(loose.items(), 1):
            if _remove_loose_if_unchanged(store, h, listed_mtime, None if h in keep else cutoff):
                report.loose_removed += 1
            if progress is not None and (n % 1000 == 0 or n == len(loose)):
                progress("removing loose objects", n, len(loose))
        report.temp_removed = _sweep_temp(store, now)
        store.refresh(force=True)
        return report


LEAF_CODES = frozenset(KIND_CODES[kind] for kind, cls in KINDS.items() if cls.references is Object.references)
"""Pack codes of the kinds that reference nothing: the walk needs no more than an entry's header for them."""


class _Listing:
    """One pack's index, read in bulk, and whether its checksums verify: only then are its leaves
    trusted from their headers and its entries copied as they are stored."""

    def __init__(self, pack: Pack) -> None:
        self.pack = pack
        self.columns = pack.index.columns()
        self.ids, self.offsets, _, self.mtimes = self.columns
        self.sound = pack.checksums_ok()

    def leaves(self) -> Iterator[bytes]:
        """The ids whose entries are of a kind that references nothing (from each entry's first byte,
        read in one go; the pages read are let go at once)."""
        if not self.sound or not self.ids:
            return iter(())
        m = self.pack.map
        codes = operator.itemgetter(*self.offsets)(m) if len(self.offsets) > 1 else (m[self.offsets[0]],)
        self.pack.release_pages()
        return itertools.compress(self.ids, map(LEAF_CODES.__contains__, codes))


def _list_packs(store: DiskObjectStore) -> list[_Listing]:
    """Every pack's listing, the largest first: an object in several packs is copied from the first."""
    return [_Listing(p) for p in sorted(store.packs(), key=lambda p: -p.count)]


class _Packed:
    """Every packed id, and the newest mtime of each: from its pack's listing, or (for an id in several
    packs, which is rare) from a table of those only, so gc holds no table of all ids and mtimes."""

    def __init__(self, listed: list[_Listing]) -> None:
        self.ids: set[bytes] = set()
        twice: set[bytes] = set()
        for listing in listed:
            if self.ids:
                twice.update(self.ids.intersection(listing.ids))
            self.ids.update(listing.ids)
        self.newest: dict[bytes, int] = {}
        for listing in listed if twice else ():
            for i in itertools.compress(range(len(listing.ids)), map(twice.__contains__, listing.ids)):
                h = listing.ids[i]
                self.newest[h] = max(self.newest.get(h, 0), listing.mtimes[i])
        self.listed = listed

    def mtime(self, h: bytes) -> int:
        """The newest mtime of packed `h` (0 if it is not packed); one index lookup."""
        if h in self.newest:
            return self.newest[h]
        for listing in self.listed:
            t = listing.pack.mtime(Hash(h))
            if t is not None:
                return t
        return 0


def _leaves(listed: list[_Listing]) -> set[bytes]:
    leaves: set[bytes] = set()
    for listing in listed:
        leaves.update(listing.leaves())
    return leaves


def _write_kept(store: DiskObjectStore, repo: Repo, listed: list[_Listing], keep: set[bytes],
                packed: _Packed, loose: dict[Hash, float], w: Walk, skipped: list[Hash] | None,
                damaged: Callable[[Hash], None] | None,
                tick: Callable[[int, int], None] | None) -> PackResult:
    """One new pack of `keep`: entries of verified packs copied as they are stored, the rest (loose
    objects, objects of packs that do not verify) read, re-hashed and compressed afresh, one at a time.
    An object that cannot be read is left out and named in `skipped` (with no `skipped`, StorageError)."""
    remaining = set(keep)
    both = loose.keys() & packed.ids
    hints = cast(Mapping[bytes, str], w.hints)  # keyed by Hash, looked up by the index's plain bytes
    # Versions of a file: a name hint that several kept objects of one sort share (leaves, or objects
    # the walk read), e.g. the blobs of one path, or the tree nodes at one place in the namespace.
    read = keep & w.kinds.keys()
    versions = {hint for group in (collections.Counter(map(hints.get, keep - read)), collections.Counter(
        map(hints.get, read))) for hint, count in group.items() if hint and count > 1}
    reuse: list[Reuse] = []
    for listing in listed:
        if not listing.sound or not remaining:
            continue
        positions = list(itertools.compress(range(len(listing.ids)), map(remaining.__contains__, listing.ids)))
        if not positions:
            continue
        taken = [listing.ids[i] for i in positions]
        remaining.difference_update(taken)
        mtimes = list(map(listing.mtimes.__getitem__, positions))
        if packed.newest:
            for k, h in enumerate(taken):
                if h in packed.newest:
                    mtimes[k] = packed.newest[h]
        if both:
            for k, h in enumerate(taken):
                if h in both:
                    mtimes[k] = int(max(loose[_as_hash(h)], mtimes[k]))
        reuse.append(Reuse(listing.pack, positions, mtimes, listing.columns, hints, versions))
    items: list[PackItem] = []
    # In walk order (newest history first), so each version of a file is packed beside its neighbours.
    walked = [h for h in w.kinds if h in remaining]
    for h in itertools.chain(walked, map(_as_hash, remaining.difference(walked))):
        mtime = int(max(loose.get(h, 0.0), float(packed.mtime(h) if h in packed.ids else 0)))
        try:
            items.append(_item(store, h, w.kinds.get(h, ""), mtime, w.hints.get(h, "")))
        except StorageError:
            if skipped is None:
                raise
            # Unreachable, young and unreadable (gc): nothing can be packed; a loose copy stays for fsck.
            keep.discard(h)
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


def _item(store: DiskObjectStore, h: Hash, kind: str, mtime: int, hint: str) -> PackItem:
    """A pack item read by the pack writer when it gets to it. An object the walk did not read is read
    now, to learn its kind (and, if small, kept: the unreachable young are few)."""
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


def _disk(repo: Repo) -> DiskObjectStore:
    if not isinstance(repo.objects, DiskObjectStore):
        raise BadInput("this command needs an on-disk store")
    return repo.objects


@dataclass
class PruneReport:
    removed: list[Hash] = field(default_factory=list)
    kept_recent: int = 0
    dry_run: bool = False


def prune(repo: Repo, expire: str | None = None, *, dry_run: bool = False, now: float | None = None) -> PruneReport:
    """Delete unreachable loose objects older than `expire` (default gc.pruneExpire). Packs are untouched."""
    now = time.time() if now is None else now
    cutoff = parse_age(expire, now) if expire is not None else config_cutoff(
        repo, "gc.pruneExpire", DEFAULT_PRUNE_EXPIRE, now)
    store = _disk(repo)
    report = PruneReport(dry_run=dry_run)
    with gc_lock(repo):
        loose = _loose_listing(store)
        w = _mark(repo, now, None, None)
        _require_complete(w, "prune")
        for h, listed in sorted(loose.items()):
            if h in w.reachable:
                continue
            if cutoff is None or listed >= cutoff or h in w.inflight:
                report.kept_recent += 1
            elif dry_run or _remove_loose_if_unchanged(store, h, listed, cutoff):
                report.removed.append(h)
    return report


@dataclass
class RepackReport:
    pack: str | None = None
    packed: int = 0
    packs_removed: int = 0
    loose_removed: int = 0
    methods: dict[str, int] = field(default_factory=dict)


def repack(
    repo: Repo, *, all_objects: bool = False, delete: bool = False, progress: Progress | None = None
) -> RepackReport:
    """Pack the loose objects (with `all_objects`, every object, into one pack); with `delete`, remove the
    loose copies now packed and (with `all_objects`) the old packs. Nothing unreachable is dropped."""
    store = _disk(repo)
    report = RepackReport()
    with gc_lock(repo), _no_cycle_collection():
        store.refresh(force=True)
        loose = _loose_listing(store)
        every = _list_packs(store)
        listed = every if all_objects else []
        packed = _Packed(listed)
        keep = packed.ids | loose.keys()
        if not keep:
            return report
        count = (lambda n: progress("counting objects", n, None)) if progress else None
        w = walk(store, ref_roots(repo.refs, None), progress=count, leaves=_leaves(every))
        tick = (lambda n, total: progress("packing", n, total)) if progress else None
        result = _write_kept(store, repo, listed, keep, packed, loose, w, None, None, tick)
        report.pack, report.packed, report.methods = result.name, result.count, result.methods
        if delete:
            for listing in listed:
                if listing.pack.name != result.name:
                    _remove_pack(listing.pack.path)
                    report.packs_removed += 1
            for n, (h, listed_mtime) in enumerate(loose.items(), 1):
                if _remove_loose_if_unchanged(store, h, listed_mtime, None):
                    report.loose_removed += 1
                if progress is not None and (n % 1000 == 0 or n == len(loose)):
                    progress("removing loose objects", n, len(loose))
        store.refresh(force=True)
    return report
