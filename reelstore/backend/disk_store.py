"""The on-disk object store: loose objects plus any number of packs, behind the one ObjectStore interface.

Packs come and go under a running reader (gc writes a new pack, then deletes the old packs and the loose
copies), so a miss is never trusted at once: the pack directory is rescanned when it changed and the
lookup retried (backend/packs/pack_set.py keeps the listing, and opens a pack when a lookup first reaches
it). A pack whose index is missing, or whose trailer does not match its index, is never used; it is
listed in `problems()` and named in the error when an object cannot be found.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from reelstore.backend.inflight import Inflight
from reelstore.backend.object_counts import count_objects
from reelstore.backend.object_store import LooseObjectStore, ObjectStore
from reelstore.backend.packs.gc_lock import GC_LOCK
from reelstore.backend.packs.pack import Pack
from reelstore.backend.packs.pack_set import NO_INDEX, PackSet
from reelstore.backend.packs.roll_up import roll_up
from reelstore.errors import BadInput, NotFound, StorageError
from reelstore.objects.hash import Hash

if TYPE_CHECKING:  # imported where used: a read that packs or loose files answer needs no writer, write
    # batch, pack import, index repair or journal segment
    from reelstore.backend.packs.pack_copy import Reuse
    from reelstore.backend.packs.pack_item import PackItem, PackOptions, PackResult
    from reelstore.backend.segment import Segment, Segments
    from reelstore.backend.upkeep import GcReport, Mark, Progress, PruneReport, RepackReport, StoreCheck
    from reelstore.backend.write_batch import WriteBatch
    from reelstore.objects.block import Object

ROLL_UP_PACKS = 32
"""Past this many packs, the end of a batch merges the small ones (git's gc.autoPackLimit is 50)."""

REUSE_YOUNG_S = 24 * 3600
"""`reuse` writes again an object whose newest copy is older than this (see there)."""

INDEX_WAITS = 40
INDEX_WAIT_S = 0.005
"""A miss waits INDEX_WAITS × INDEX_WAIT_S for a pack's index that is about to appear (or for the pack,
being deleted index first, to go)."""
INDEX_WAIT_LIVE = 2000
"""While a live writer still holds the temporary index of an index-less pack, the wait goes on, up to
INDEX_WAIT_LIVE × INDEX_WAIT_S (10 s): a loaded machine can hold a writer between its two renames far
longer than 200 ms, and a miss then was reported as damage (a false E007 in gc's fence)."""

LIST_LOOSE_AT = 256
"""From this many objects, one write finds their loose copies by listing shards, not one lookup each."""

PACK_BATCH = 1000
"""A put_many of at least this many new objects is written as one pack instead of loose files."""


class DiskObjectStore(ObjectStore):
    def __init__(self, root: Path, *, fsync: bool = True, pack_batch: int = PACK_BATCH) -> None:
        self.root = Path(root)
        self._root = str(self.root)
        self.fsync = fsync
        self.pack_batch = pack_batch
        self.inflight: Inflight | None = None
        """Where writes are registered until their ref moves (gc's fence); set by Repo.open."""
        self.setting: Callable[[str], str | None] = _no_setting
        """The store's config, for the pack writer's options (`pack.depth`…); set by Repo.open."""
        self.loose = LooseObjectStore(self.root, fsync=fsync)
        self.pack_dir = self.root / "pack"
        self._set = PackSet(self.pack_dir, fsync=fsync)
        self._local = threading.local()
        self._segments: Segments | None = None
        self._segments_guard = threading.Lock()

    @property
    def segments(self) -> Segments:
        """The journal segments, opened on first use (a drain's log or a miss in packs and loose files)."""
        segments = self._segments
        if segments is None:
            from reelstore.backend.segment import Segments

            with self._segments_guard:
                if self._segments is None:
                    self._segments = Segments(self.root / "journal", fsync=self.fsync)
                segments = self._segments
        return segments

    # The open batch is per thread: a thread's uncommitted objects are its own (another thread's flush
    # or discard never touches them, and other threads do not read them before they are durable).

    @property
    def _batch(self) -> WriteBatch | None:
        batch: WriteBatch | None = getattr(self._local, "batch", None)
        return batch

    @_batch.setter
    def _batch(self, batch: WriteBatch | None) -> None:
        self._local.batch = batch

    @property
    def _batch_depth(self) -> int:
        depth: int = getattr(self._local, "depth", 0)
        return depth

    @_batch_depth.setter
    def _batch_depth(self, depth: int) -> None:
        self._local.depth = depth

    @property
    def in_batch(self) -> bool:
        return self._batch_depth > 0

    def detach_batch(self) -> Any:
        depth = self._batch_depth
        if not depth:
            return None
        state = (depth, self._batch, getattr(self._local, "packed", False))
        self._batch_depth, self._batch, self._local.packed = 0, None, False
        return state

    def attach_batch(self, state: Any) -> None:
        if state is None:
            return
        if self._batch_depth:
            raise StorageError("cannot carry a write batch into a thread that has its own batch open")
        self._batch_depth, self._batch, self._local.packed = state

    @property
    def batch_open(self) -> bool:
        """Whether this thread has objects pending in an open write batch (readable only through get_raw)."""
        return self._batch is not None

    # Pack bookkeeping

    def _await_index(self, h: Hash, errors: list[StorageError]) -> bytes | None:
        """A pack seen without its index belongs to a writer between its two renames (a dead writer's
        is repaired by `refresh`): a miss waits for the index, rescanning, before it reports the object
        absent (gc's fence reads objects of writes still in flight): briefly, and for as long as the
        pack's writer lives and holds its temporary index (bounded: INDEX_WAIT_LIVE)."""
        from reelstore.backend.packs.batch import index_coming

        for n in range(INDEX_WAIT_LIVE):
            waiting = [self.pack_dir / name for name, why in self._set.problems.items() if why == NO_INDEX]
            if not waiting or (n >= INDEX_WAITS and not any(index_coming(p) for p in waiting)):
                return None
            time.sleep(INDEX_WAIT_S)
            if self.refresh(force=True):
                raw = self._read_packs(h, errors)
                if raw is not None:
                    return raw
        return None

    def refresh(self, force: bool = False) -> bool:
        """Rescan the pack directory if it changed; True if the set of packs changed."""
        return self._set.refresh(force)

    def packs(self) -> list[Pack]:
        """Every usable pack, newest first (opening any not opened yet)."""
        return list(self._set.opened())

    def problems(self) -> dict[str, str]:
        """Pack files that cannot be used, by file name, with the reason (every pack is opened to know)."""
        self.packs()
        return dict(self._set.problems)

    def close(self) -> None:
        self._set.close()

    # The interface

    def _in_packs(self, h: Hash) -> bool:
        return any(h in p for p in self._set.opened())

    def loose_path(self, h: Hash) -> str:
        hx = h.hex()
        return f"{self._root}/{hx[:2]}/{hx[2:]}"

    def _read_loose(self, h: Hash) -> bytes | None:
        """The loose copy of `h`, verified, or None if there is none (string paths: this is the hot path)."""
        try:
            with open(self.loose_path(h), "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StorageError(f"cannot read object {h.hex()}: {exc}", id=h) from None
        raw = self.loose.inflate(data, h)
        if Hash.of(raw) != h:
            raise StorageError(f"object {h.hex()} is damaged: content does not hash to its id", id=h)
        return raw

    def loose_files(self) -> dict[Hash, float]:
        """Every loose object: id -> mtime, from one directory scan."""
        out: dict[Hash, float] = {}
        try:
            shards = [e for e in os.scandir(self._root) if len(e.name) == 2 and e.is_dir()]
        except FileNotFoundError:
            return out
        for shard in shards:
            for entry in os.scandir(shard.path):
                name = shard.name + entry.name
                if len(name) != 64 or entry.name.startswith("."):
                    continue
                try:
                    h = Hash(bytes.fromhex(name))
                    if h.hex() == name:
                        out[h] = entry.stat().st_mtime
                except (ValueError, FileNotFoundError):
                    continue
        return out

    def remove_if_unchanged(self, h: Hash, listed: float, older_than: float | None = None) -> bool:
        path = self.loose_path(h)
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

    def remove_pack(self, pack: Pack) -> None:
        pack.path.with_suffix(".idx").unlink(missing_ok=True)
        pack.path.unlink(missing_ok=True)

    def sweep_temp(self, older_than: float) -> int:
        """`.tmp-*` files a killed writer left in objects/XX/ or objects/pack/, and staging directories
        a killed fetch left in objects/."""
        removed = 0
        dirs = [self.pack_dir] + [Path(e.path) for e in os.scandir(self.root) if len(e.name) == 2 and e.is_dir()]
        for d in dirs:
            try:
                entries = list(os.scandir(d))
            except FileNotFoundError:
                continue
            for entry in entries:
                try:
                    if entry.name.startswith(".tmp-") and entry.stat().st_mtime < older_than:
                        os.unlink(entry.path)
                        removed += 1
                except FileNotFoundError:
                    continue
        for entry in os.scandir(self.root):
            # A fetch stages large objects in objects/.tmp-fetch-*/ and removes it when done.
            try:
                if entry.name.startswith(".tmp-fetch-") and entry.is_dir() and entry.stat().st_mtime < older_than:
                    import shutil  # only for a killed fetch's staging directory

                    shutil.rmtree(entry.path, ignore_errors=True)
                    removed += 1
            except FileNotFoundError:
                continue
        return removed

    def protected(self) -> set[Hash]:
        return self.inflight.protected() if self.inflight is not None else set()

    def has(self, h: Hash) -> bool:
        # Rescan first (one stat when nothing changed): a pack gc has just deleted must not answer yes
        # for an object it dropped, or a writer trusting has() would reference a collected object.
        if self._batch is not None and h in self._batch:
            return True
        self.refresh()
        return self._in_packs(h) or os.path.exists(self.loose_path(h)) or self.segments.find(h) is not None

    def _read_packs(self, h: Hash, first_error: list[StorageError]) -> bytes | None:
        for pack in self._set.opened():
            i = pack.index.find(h)
            if i >= 0:
                try:
                    return pack.get_raw(h, i)
                except StorageError as err:
                    first_error.append(err)
        return None

    def get_raw(self, h: Hash) -> bytes:
        if self._batch is not None and h in self._batch:
            pending = self._batch.get_raw(h)
            if pending is not None:
                return pending
        errors: list[StorageError] = []
        raw = self._read_packs(h, errors)
        if raw is not None:
            return raw
        try:
            raw = self._read_loose(h)
            if raw is not None:
                return raw
        except StorageError as err:
            errors.append(err)
        if self.refresh(force=self._set.racy()):
            raw = self._read_packs(h, errors)
            if raw is not None:
                return raw
        raw = self._await_index(h, errors)
        if raw is not None:
            return raw
        try:
            raw = self.segments.get_raw(h)
            if raw is not None:
                return raw
        except StorageError as err:
            errors.append(err)
        if errors:
            raise errors[0]
        if self._set.problems:
            bad = "; ".join(f"{k}: {v}" for k, v in sorted(self._set.problems.items()))
            raise StorageError(f"no object {h.hex()}, and some packs are unusable ({bad})", id=h)
        raise NotFound(f"no object {h.hex()}", id=h)

    def resolve(self, prefix: str) -> Hash:
        try:
            return super().resolve(prefix)
        except NotFound:
            problems = self.problems()
            if not problems:
                raise
            bad = "; ".join(f"{k}: {v}" for k, v in sorted(problems.items()))
            raise StorageError(f"no object {prefix}, and some packs are unusable ({bad})") from None

    def begin_batch(self) -> None:
        """Objects stored from here go into one new pack, durable (one fsync) at `flush` or at the end
        of the outermost batch."""
        self._batch_depth += 1

    def end_batch(self, keep: bool) -> None:
        self._batch_depth = max(0, self._batch_depth - 1)
        if self._batch_depth:
            return
        if keep:
            self.flush()
            if getattr(self._local, "packed", False):  # only a new pack takes the store past the roll-up's limit
                self._local.packed = False
                self.roll_up()
        elif self._batch is not None:
            self._batch.discard()
            self._batch = None

    def roll_up(self, limit: int = ROLL_UP_PACKS, factor: int = 2) -> str | None:
        """Past `limit` packs, merge the small ones (backend/packs/roll_up.py): the new pack's name, or None."""
        return roll_up(self, limit, factor)

    def flush(self) -> None:
        pending, self._batch = self._batch, None
        if pending is not None and pending.finish() is not None:
            self._set.forget()  # the next read rescans and opens the new pack
            self._local.packed = True

    def _store(self, items: list[tuple[Hash, bytes]]) -> None:
        """Inside a batch, new objects join the batch (one pack, or one loose file for a lone object); an
        object already loose only has its mtime refreshed. Outside one, small batches go loose. A large
        batch becomes one pack, except objects already loose, which only have their mtime refreshed;
        objects already packed are packed again with a fresh mtime, which is what keeps them inside the
        gc grace period."""
        if self.inflight is not None:
            self.inflight.register(h for h, _ in items)
        if self._batch_depth:
            now = int(time.time())
            loose_now = self._loose_among([h for h, _ in items])
            for h, raw in items:
                if self._batch is not None and h in self._batch:
                    continue
                if h in loose_now:
                    try:
                        os.utime(self.loose_path(h))
                        continue
                    except FileNotFoundError:  # collected since it was seen: written again below
                        pass
                if self._batch is None:
                    from reelstore.backend.write_batch import WriteBatch

                    self._batch = WriteBatch(self.pack_dir, self.loose, fsync=self.fsync)
                self._batch.add(h, raw, now)
            return
        if len(items) < self.pack_batch:
            self.loose._store(items)
            return
        loose_now = self._loose_among([h for h, _ in items])
        loose: list[tuple[Hash, bytes]] = []
        packable: list[tuple[Hash, bytes]] = []
        for item in items:
            (loose if item[0] in loose_now else packable).append(item)
        self.loose._store(loose)  # each one re-checked: written again if it went meanwhile
        if packable:
            from reelstore.backend.packs.pack_item import PackItem

            now = int(time.time())
            self.add_pack(PackItem(h, raw, now) for h, raw in packable)

    def _loose_among(self, ids: list[Hash]) -> set[Hash]:
        """Which of `ids` have a loose copy: one lookup each for a few, else one listing of each shard
        they fall in (a clone stores 20k objects: a stat each cost more than listing all 256 shards)."""
        if len(ids) < LIST_LOOSE_AT:
            return {h for h in ids if os.path.exists(self.loose_path(h))}
        names: set[str] = set()
        for shard in {h.hex()[:2] for h in ids}:
            try:
                names.update(shard + name for name in os.listdir(f"{self._root}/{shard}"))
            except FileNotFoundError:
                continue
        return {h for h in ids if h.hex() in names}

    def reuse(self, objs: Iterable[Object]) -> None:
        """Objects this thread's next ref transaction will name, some perhaps stored long ago (a fork's
        capabilities): one with a copy younger than REUSE_YOUNG_S is not written again while no gc holds
        gc.lock; the rest are put (an old loose copy has its mtime refreshed, an old packed one is
        written again). Safe beside a gc on this host, `--prune=now` included: the ids are registered in
        flight first, then the lock is checked, then the packs are listed again. A gc that takes the
        lock later lists its candidates after the registration, and its fence keeps what it names until
        the transaction lands; one that ended before has deleted what it deleted; a roll-up drops
        nothing; while one runs, it may have listed the copy as a candidate already, so the object is
        written again. The age bound keeps a gc on another host sharing the store (which does not see
        this host's registrations) from deleting the copy within its grace period (two weeks unless
        configured shorter than a day)."""
        items = [(obj.id, obj.encode()) for obj in objs]
        if self.inflight is not None:
            self.inflight.register(h for h, _ in items)
            if not os.path.exists(self.root.parent / GC_LOCK):
                self.refresh(force=self._set.racy())
                since = time.time() - REUSE_YOUNG_S
                items = [(h, raw) for h, raw in items if not self._copy_since(h, since)]
        if items:
            self.put_verified(items)

    def _copy_since(self, h: Hash, since: float) -> bool:
        """Whether a loose or packed copy of `h` has an mtime at or after `since`. An entry is never newer
        than its pack file, so older packs are not opened (a pack file made older by hand only makes
        the answer no, and the object is written again)."""
        try:
            if os.stat(self.loose_path(h)).st_mtime >= since:
                return True
        except FileNotFoundError:
            pass
        return any((t := pack.mtime(h)) is not None and t >= since for pack in self._set.opened(int(since * 1e9)))

    def add_pack(
        self,
        items: Iterable[PackItem],
        opts: PackOptions | None = None,
        progress: Callable[[int, int], None] | None = None,
        reuse: Sequence[Reuse] = (),
        damaged: Callable[[Hash], None] | None = None,
    ) -> PackResult:
        """Write one pack of `items` (and the `reuse` entries copied from packs) into objects/pack and
        start reading from it."""
        from reelstore.backend.packs.pack_write import write_pack

        result = write_pack(
            self.pack_dir, items, opts, fsync=self.fsync, progress=progress, reuse=reuse, damaged=damaged
        )
        self.refresh(force=True)
        return result

    def __iter__(self) -> Iterator[Hash]:
        seen: set[Hash] = set()
        for pack in self.packs():
            for h in pack.ids():
                if h not in seen:
                    seen.add(h)
                    yield h
        for h in self.loose:
            if h not in seen:
                seen.add(h)
                yield h
        for h in self.segments.ids():
            if h not in seen:
                seen.add(h)
                yield h

    def _candidates(self, prefix: str) -> Iterable[Hash]:
        found = set(self.loose._candidates(prefix))
        lo = bytes.fromhex(prefix[: len(prefix) & ~1])
        for pack in self.packs():
            found.update(h for h in pack.ids() if h.startswith(lo) and h.hex().startswith(prefix))
        return found

    def delete(self, h: Hash) -> None:
        """Remove the loose copy of `h`; packed copies go only when gc or repack rewrites their pack."""
        self.loose.delete(h)

    def import_pack(self, fill: Callable[[IO[bytes]], object]) -> tuple[Path, bytes, int]:
        from reelstore.backend.packs import pack_import

        found = pack_import.import_pack(self.pack_dir, fill)
        self.refresh(force=True)
        return found

    def segment(self, trunk: str) -> Segment:
        return self.segments.segment(trunk)

    def counts(self) -> dict[str, int]:
        """git's count-objects -v figures (backend/object_counts.py)."""
        return count_objects(self)

    # Upkeep: gc, repack and prune rewrite packs and delete files (backend/packs/pack_gc.py); the caller holds
    # gc's lock. pack_gc is imported by these methods alone: it loads 10 more modules (the kinds' codec,
    # the pack copier and verifier), 32 ms on top of disk_store here (best of 6, timed around `import
    # reelstore.backend.packs.pack_gc` after disk_store), which every command would pay for four that use it.

    def gc(
        self, mark: Mark, cutoff: float | None, *, dry_run: bool = False, progress: Progress | None = None, now: float
    ) -> GcReport:
        from reelstore.backend.packs import pack_gc

        return pack_gc.collect(self, mark, cutoff, dry_run, progress, now)

    def repack(
        self, mark: Mark, *, all_objects: bool = False, delete: bool = False, progress: Progress | None = None
    ) -> RepackReport:
        """Pack the loose objects (with `all_objects`, every object, into one pack), dropping nothing;
        with `delete`, remove the copies now packed elsewhere."""
        from reelstore.backend.packs import pack_gc

        return pack_gc.repack(self, mark, all_objects, delete, progress)

    def prune(self, mark: Mark, cutoff: float | None, *, dry_run: bool = False) -> PruneReport:
        """Delete unreachable loose objects older than `cutoff`; packs are untouched."""
        from reelstore.backend.packs import pack_gc

        return pack_gc.prune(self, mark, cutoff, dry_run)

    def fsck(self, *, full: bool = True, progress: Progress | None = None) -> StoreCheck:
        from reelstore.backend.packs import pack_gc

        return pack_gc.check_store(self, full, progress)

    def mtime(self, h: Hash) -> float:
        """The newest mtime of any copy of `h`, in seconds (E001 if there is none)."""
        best: float | None = None
        try:
            best = self.loose.mtime(h)
        except NotFound:
            pass
        for pack in self.packs():
            t = pack.mtime(h)
            if t is not None and (best is None or t > best):
                best = float(t)
        seg = self.segments.find(h) if best is None else None
        if seg is not None:
            best = seg.path.stat().st_mtime
        if best is None:
            raise NotFound(f"no object {h.hex()}", id=h)
        return best


def _no_setting(key: str) -> str | None:
    """A store opened without its config: every pack option at its default."""
    return None


def on_disk(store: ObjectStore, what: str) -> DiskObjectStore:
    """`store` as the disk backend, for the commands about its packs and loose files; E014 for any other
    backend, which keeps no such files."""
    if not isinstance(store, DiskObjectStore):
        raise BadInput(f"{what} needs a store on disk: a {type(store).__name__} keeps no pack or loose files")
    return store
