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

import os
import re
import shutil
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from reelstore.errors import BadInput, Conflict, StorageError
from reelstore.maintenance.reach import Walk, ref_roots, walk
from reelstore.objects import Hash, Object
from reelstore.storage.disk_store import DiskObjectStore
from reelstore.storage.inflight import Inflight
from reelstore.storage.object_store import MemoryObjectStore
from reelstore.storage.pack import PackItem, PackOptions
from reelstore.storage.repo import Repo

HELD_RAW = 64 * 1024
"""Objects up to this size are held in memory between marking and packing; larger ones (the pieces of
large content) are read again by the pack writer, so gc's memory does not grow with the store's bytes."""
DEFAULT_PRUNE_EXPIRE = "2.weeks.ago"
DEFAULT_REFLOG_EXPIRE = "90.days.ago"
LOCK_NAME = "gc.lock"

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
    pruned_ids: list[Hash] = field(default_factory=list)
    damaged_skipped: list[Hash] = field(default_factory=list)
    """Unreachable young objects that could not be read, so not packed (fsck names them)."""

    def to_json(self) -> dict[str, Any]:
        doc = {k: v for k, v in self.__dict__.items() if k not in ("pruned_ids", "damaged_skipped")}
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


def _mark(repo: Repo, now: float, progress: Progress | None, keep_raw: dict[Hash, bytes] | None) -> Walk:
    """Everything reachable from the refs and young reflog entries, then the fence (see `_fence`)."""
    since = config_cutoff(repo, "gc.reflogExpire", DEFAULT_REFLOG_EXPIRE, now)
    since_ms = 0 if since is None else int(since * 1000)

    def seen(obj: Object) -> None:
        if keep_raw is not None:
            raw = obj.encode()
            if len(raw) <= HELD_RAW:
                keep_raw[obj.id] = raw

    tick = (lambda n: progress("marking", n, None)) if progress else None
    roots = ref_roots(repo.refs, since_ms)
    w = walk(repo.objects, roots, progress=tick, on_object=seen)
    _fence(repo, w, roots, since_ms, seen)
    return w


FENCE_ROUNDS = 3


def _fence(repo: Repo, w: Walk, roots: list[tuple[str, Hash]], since_ms: int,
           seen: Callable[[Object], None]) -> None:
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
        moved = walk(repo.objects, [(n, h) for n, h in now if h not in done], on_object=seen, known=done)
        done |= moved.reachable | set(moved.missing) | set(moved.damaged)
        pending = walk(repo.objects, [("an in-flight write", h) for h in protected - done], on_object=seen,
                       known=done)
        # An in-flight write may not be on disk yet (or ever, if its writer fails): what its walk misses
        # is not damage; what it reaches is kept.
        pending.missing.clear()
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
    with gc_lock(repo, wait_s):
        store.refresh(force=True)
        loose = _loose_listing(store)
        packs = store.packs()
        packed: dict[Hash, int] = {}
        for pack in packs:
            for h, _, packed_at in pack.entries():
                packed[h] = max(packed_at, packed.get(h, 0))
        raws: dict[Hash, bytes] = {}
        w = _mark(repo, now, progress, raws)
        _require_complete(w, "gc")
        cands = set(loose) | set(packed)

        def mtime(h: Hash) -> float:
            return max(loose.get(h, 0.0), float(packed.get(h, 0)))

        report = GcReport(reachable=len(w.reachable), candidates=len(cands), dry_run=dry_run)
        keep: set[Hash] = set()
        for h in cands:
            if h in w.reachable:
                keep.add(h)
            elif cutoff is None or mtime(h) >= cutoff or h in w.inflight:
                keep.add(h)
                report.kept_recent += 1
            else:
                report.pruned_ids.append(h)
        report.pruned = len(report.pruned_ids)
        report.pruned_ids.sort()
        report.packed = len(keep)
        if dry_run:
            return report
        kinds = dict(w.kinds)
        for h in [h for h in keep if h not in raws and h not in kinds]:
            try:
                raw = store.get_raw(h)
            except StorageError:
                # Unreachable, young and unreadable: nothing can be packed; a loose copy stays for fsck.
                keep.discard(h)
                report.damaged_skipped.append(h)
                continue
            if len(raw) <= HELD_RAW:
                raws[h] = raw
            else:
                kinds[h] = raw[: raw.index(b"\0")].decode("ascii")
        report.packed = len(keep)
        current = packs[0].name if len(packs) == 1 and not loose and set(packs[0].ids()) == keep else None
        if current is None and keep:

            def items() -> Iterator[PackItem]:
                for h in [h for h in raws if h in keep] + [h for h in keep if h not in raws]:
                    yield _item(store, h, raws.get(h), kinds.get(h, ""), int(mtime(h)), w.hints.get(h, ""))

            tick = (lambda n, total: progress("packing", n, total)) if progress else None
            current = store.add_pack(items(), _pack_options(repo), progress=tick).name
        report.pack = current
        for pack in packs:
            if pack.name != current:
                _remove_pack(pack.path)
                report.packs_removed += 1
        for n, (h, listed) in enumerate(loose.items(), 1):
            if _remove_loose_if_unchanged(store, h, listed, None if h in keep else cutoff):
                report.loose_removed += 1
            if progress is not None and (n % 1000 == 0 or n == len(loose)):
                progress("removing loose objects", n, len(loose))
        report.temp_removed = _sweep_temp(store, now)
        store.refresh(force=True)
        return report


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


def _item(store: DiskObjectStore, h: Hash, raw: bytes | None, kind: str, mtime: int, hint: str) -> PackItem:
    """A pack item: held bytes if small, else read by the pack writer when it gets to it (a large
    object's kind is known from the walk; an unwalked one is read now, to learn its kind and size)."""
    if raw is None and not kind:
        raw = store.get_raw(h)
        if len(raw) > HELD_RAW:
            kind, raw = raw[: raw.index(b"\0")].decode("ascii"), None
    if raw is not None:
        return PackItem(h, raw, mtime, hint)
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
    with gc_lock(repo):
        store.refresh(force=True)
        loose = _loose_listing(store)
        packs = store.packs() if all_objects else []
        mtimes: dict[Hash, float] = dict(loose)
        for pack in packs:
            for h, _, mtime in pack.entries():
                mtimes[h] = max(float(mtime), mtimes.get(h, 0.0))
        if not mtimes:
            return report
        raws: dict[Hash, bytes] = {}

        def seen(obj: Object) -> None:
            raw = obj.encode()
            if len(raw) <= HELD_RAW:
                raws[obj.id] = raw

        count = (lambda n: progress("counting objects", n, None)) if progress else None
        w = walk(store, ref_roots(repo.refs, None), progress=count, on_object=seen)
        hints = w.hints

        def items() -> Iterator[PackItem]:
            for h in [h for h in raws if h in mtimes] + [h for h in mtimes if h not in raws]:
                yield _item(store, h, raws.get(h), w.kinds.get(h, ""), int(mtimes[h]), hints.get(h, ""))

        tick = (lambda n, total: progress("packing", n, total)) if progress else None
        result = store.add_pack(items(), _pack_options(repo), progress=tick)
        report.pack, report.packed, report.methods = result.name, result.count, result.methods
        if delete:
            for pack in packs:
                if pack.name != result.name:
                    _remove_pack(pack.path)
                    report.packs_removed += 1
            for n, (h, listed) in enumerate(loose.items(), 1):
                if _remove_loose_if_unchanged(store, h, listed, None):
                    report.loose_removed += 1
                if progress is not None and (n % 1000 == 0 or n == len(loose)):
                    progress("removing loose objects", n, len(loose))
        store.refresh(force=True)
    return report
