"""Object stores: one interface, an in-memory backend and the on-disk one.

Every read re-hashes what it read: a store never returns bytes that do not hash to the id asked for.
A mismatch, an undecodable file or a torn write surfaces as E007, never as wrong content.
"""

from __future__ import annotations

import os
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import zstandard

from reelstore.backend.fileio import fsync_dir, temp_name, write_new
from reelstore.codec import MAX_OBJECT_SIZE, MAX_TAG, split_frame
from reelstore.errors import BadInput, NotFound, StorageError
from reelstore.objects import KIND_HOMES
from reelstore.objects.hash import Hash, is_prefix

if TYPE_CHECKING:
    from reelstore.backend.segment import Segment
    from reelstore.backend.upkeep import GcReport, Mark, Progress, StoreCheck
    from reelstore.objects.block import Object  # the kinds' codec: loaded by the first decode

MAX_RAW = MAX_OBJECT_SIZE + MAX_TAG + 1
T = TypeVar("T", bound="Object")


def expect_kind(obj: Object, cls: type[T]) -> T:
    """`obj` if it is a `cls`; E007 otherwise, since only a damaged store points at the wrong kind."""
    if not isinstance(obj, cls):
        raise StorageError(f"object {obj.id.hex()} is a {obj.kind} where a {cls.kind} was expected", id=obj.id)
    return obj


class ObjectStore(ABC):
    """The interface every backend offers (see the package's docstring). A backend implements the six
    primitives (has, get_raw, _store, iteration, mtime, delete); everything else has a default built on
    them, which a backend overrides only to do better: group commit (the batch methods), `gc` and `fsck`
    (the disk store packs and sweeps files), `segment` (a journal file of its own)."""

    @abstractmethod
    def has(self, h: Hash) -> bool: ...

    @abstractmethod
    def get_raw(self, h: Hash) -> bytes:
        """The verified canonical bytes of `h` (E001 if absent, E007 if damaged)."""

    @abstractmethod
    def _store(self, items: list[tuple[Hash, bytes]]) -> None:
        """Persist already-verified (id, canonical bytes) pairs."""

    @abstractmethod
    def __iter__(self) -> Iterator[Hash]: ...

    @abstractmethod
    def mtime(self, h: Hash) -> float:
        """When `h` was last written here, in seconds since the epoch (E001 if absent): gc's grace period."""

    @abstractmethod
    def delete(self, h: Hash) -> None:
        """Drop the copy of `h` held on its own (in a store with packs, the loose one; packed copies go
        only when gc or repack rewrites their pack). Absent is not an error."""

    # Upkeep. A backend that keeps files of its own overrides these; the defaults work object by object
    # through the primitives above, which is all a backend that keeps no files needs.

    def protected(self) -> set[Hash]:
        """Ids live writers have registered and not yet referenced from a ref: gc's fence keeps them (a
        backend that registers no writes has none)."""
        return set()

    def gc(
        self, mark: Mark, cutoff: float | None, *, dry_run: bool = False, progress: Progress | None = None, now: float
    ) -> GcReport:
        """Collect garbage: list the candidates, call `mark` for what is live, then drop each candidate
        that is not live, not in flight, and last written before `cutoff` (None: drop nothing). `now`
        is the time the grace periods count from. The caller holds gc's lock."""
        from reelstore.backend import upkeep  # gc's code and the kinds' codec (~3.6 ms, -X importtime)

        return upkeep.collect(self, mark, cutoff, dry_run=dry_run)

    def segment(self, trunk: str) -> Segment | None:
        """The append-only file the trunk's drain journal goes to, if this backend keeps one (else the
        journal is objects and a ref)."""
        return None

    def fsck(self, *, full: bool = True, progress: Progress | None = None) -> StoreCheck:
        """Check every object this backend holds (re-hashed and decoded by its kind) and its own storage
        (`full`: byte by byte, where that costs more than reading each object); damage is named."""
        from reelstore.backend import upkeep  # as in `gc`

        return upkeep.check(self, self, progress)

    def _candidates(self, prefix: str) -> Iterable[Hash]:
        return (h for h in self if h.hex().startswith(prefix))

    def __contains__(self, h: object) -> bool:
        return isinstance(h, bytes) and len(h) == 32 and self.has(Hash(h))

    def get(self, h: Hash) -> Object:
        """The object `h`, decoded from bytes `get_raw` has already re-hashed (E007 if undecodable)."""
        from reelstore.objects.block import decode  # a verb that only checks a kind never loads the kinds

        raw = self.get_raw(h)
        try:
            obj = decode(raw)
        except BadInput as exc:
            raise StorageError(f"object {h.hex()} is damaged: {exc.message}", id=h) from None
        obj.__dict__["id"] = h
        return obj

    def kind(self, h: Hash) -> str:
        """The kind of object `h`, from the tag of the bytes `get_raw` has re-hashed (the hash covers the
        tag), without decoding the body: what a ref's kind check needs (E007 if the tag names no kind)."""
        raw = self.get_raw(h)
        try:
            kind = split_frame(raw)[0]
        except BadInput as exc:
            raise StorageError(f"object {h.hex()} is damaged: {exc.message}", id=h) from None
        if kind not in KIND_HOMES:
            raise StorageError(f"object {h.hex()} is damaged: unknown kind {kind!r}", id=h)
        return kind

    def get_as(self, h: Hash, cls: type[T]) -> T:
        """`get` for an id that a ref or another object names as a `cls`: any other kind there means
        the store is damaged (E007)."""
        return expect_kind(self.get(h), cls)

    def put(self, obj: Object) -> Hash:
        return self.put_many([obj])[0]

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Group every object stored inside the block into one durable write (group commit); if the
        block raises, what was not flushed is discarded."""
        self.begin_batch()
        try:
            yield
        except BaseException:
            self.end_batch(keep=False)
            raise
        self.end_batch(keep=True)

    def begin_batch(self) -> None:
        """Open a batch (batches nest: the outermost one decides). A backend without durable writes has
        nothing to group, so by default objects are stored at once."""
        return

    def end_batch(self, keep: bool) -> None:
        """Close a batch: the outermost one makes what it holds durable (`keep`) or discards it."""
        return

    @property
    def in_batch(self) -> bool:
        """Whether this thread has a batch open (a backend without batches never has)."""
        return False

    def detach_batch(self) -> Any:
        """Take this thread's open batch off the thread (None if it has none), for `attach_batch` in
        the next thread to write into it: a batch is per thread, and a writer shared by threads (a view
        handle gathering a transaction) must end its batch in whichever thread lands it."""
        return None

    def attach_batch(self, state: Any) -> None:
        """Make a batch `detach_batch` took this thread's open batch (None: nothing to do)."""
        return

    def flush(self) -> None:
        """Make every object stored so far in the open batch durable (before a ref may name them)."""
        return

    def put_many(self, objs: Iterable[Object]) -> list[Hash]:
        """Store `objs`; E014 for one over the object size limit, which could never be read back
        (content that large goes through `backend.content`, which chunks it)."""
        return self.put_verified([(obj.id, obj.encode()) for obj in objs])

    def reuse(self, objs: Iterable[Object]) -> None:
        """Store objects this thread's next ref transaction will name, some perhaps stored long ago: a
        writer must re-put an old object it starts to reference (gc's rule), which is what this does
        unless the store can tell that no gc can drop the copy it has (the on-disk store can)."""
        self.put_many(objs)

    def put_verified(self, items: list[tuple[Hash, bytes]]) -> list[Hash]:
        """Store canonical bytes that the caller has already hashed to their ids and decoded (a fetch
        does, to verify what it received), without encoding or hashing them again; E014 as `put_many`."""
        for h, raw in items:
            if len(raw) > MAX_RAW:
                raise BadInput(
                    f"object {h.hex()} of {len(raw)} bytes exceeds the {MAX_OBJECT_SIZE}-byte object "
                    "limit; store large content as chunks (`reel put` does)"
                )
        self._store(items)
        return [h for h, _ in items]

    def resolve(self, prefix: str) -> Hash:
        """The one id starting with `prefix` (≥ 4 hex digits); E001 if none, E014 if several."""
        if not is_prefix(prefix):
            raise BadInput(f"{prefix!r} is not an object id or a prefix of 4 to 64 hex digits")
        if len(prefix) == 64:
            h = Hash.from_hex(prefix)
            if not self.has(h):
                raise NotFound(f"no object {prefix}")
            return h
        found = sorted(set(self._candidates(prefix)))
        if not found:
            raise NotFound(f"no object with prefix {prefix}")
        if len(found) > 1:
            raise BadInput(f"short id {prefix} is ambiguous: {len(found)} objects match")
        return found[0]


class MemoryObjectStore(ObjectStore):
    """For tests and embedding: nothing touches the disk."""

    def __init__(self) -> None:
        self._objects: dict[Hash, bytes] = {}
        self._mtimes: dict[Hash, float] = {}

    def has(self, h: Hash) -> bool:
        return h in self._objects

    def get_raw(self, h: Hash) -> bytes:
        try:
            raw = self._objects[h]
        except KeyError:
            raise NotFound(f"no object {h.hex()}", id=h) from None
        if Hash.of(raw) != h:
            raise StorageError(f"object {h.hex()} does not hash to its id", id=h)
        return raw

    def _store(self, items: list[tuple[Hash, bytes]]) -> None:
        now = time.time()
        for h, raw in items:
            self._objects.setdefault(h, raw)
            self._mtimes[h] = now  # writing it again makes it young again, as on disk

    def __iter__(self) -> Iterator[Hash]:
        return iter(list(self._objects))

    def delete(self, h: Hash) -> None:
        self._objects.pop(h, None)
        self._mtimes.pop(h, None)

    def mtime(self, h: Hash) -> float:
        try:
            return self._mtimes[h]
        except KeyError:
            raise NotFound(f"no object {h.hex()}", id=h) from None


class LooseObjectStore(ObjectStore):
    """`objects/ab/cdef…`: one zstd-compressed file per object, written atomically.

    Writing an object that already exists refreshes its mtime, as git does, so an object a writer
    is about to reference is young again and the gc grace period protects it.
    """

    def __init__(self, root: Path, *, fsync: bool = True, level: int = 3) -> None:
        self.root = Path(root)
        self.fsync = fsync
        self._level = level
        self._local = threading.local()

    def _codec(self) -> tuple[zstandard.ZstdCompressor, zstandard.ZstdDecompressor]:
        pair = getattr(self._local, "pair", None)
        if pair is None:
            pair = (
                zstandard.ZstdCompressor(level=self._level, write_content_size=True, write_checksum=True),
                zstandard.ZstdDecompressor(max_window_size=1 << 27),
            )
            self._local.pair = pair
        return pair

    def path(self, h: Hash) -> Path:
        hx = h.hex()
        return self.root / hx[:2] / hx[2:]

    def has(self, h: Hash) -> bool:
        return self.path(h).exists()

    def get_raw(self, h: Hash) -> bytes:
        path = self.path(h)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise NotFound(f"no object {h.hex()}", id=h) from None
        except OSError as exc:
            raise StorageError(f"cannot read object {h.hex()}: {exc}", id=h) from None
        raw = self.inflate(data, h)
        if Hash.of(raw) != h:
            raise StorageError(f"object {h.hex()} is damaged: content does not hash to its id", id=h)
        return raw

    def inflate(self, data: bytes, h: Hash) -> bytes:
        """Bounded decompression: the frame must declare its size, within the limit, and end cleanly."""
        try:
            size = zstandard.frame_content_size(data)
        except zstandard.ZstdError:
            size = -1
        if size < 0 or size > MAX_RAW:
            raise StorageError(f"object {h.hex()} is damaged: bad or oversized frame header", id=h)
        try:
            raw = self._codec()[1].decompress(data, max_output_size=size, allow_extra_data=False)
        except zstandard.ZstdError as exc:
            raise StorageError(f"object {h.hex()} is damaged: {exc}", id=h) from None
        if len(raw) != size:
            raise StorageError(f"object {h.hex()} is damaged: truncated", id=h)
        return raw

    def deflate(self, raw: bytes) -> bytes:
        return self._codec()[0].compress(raw)

    def _store(self, items: list[tuple[Hash, bytes]]) -> None:
        from reelstore.crashpoints import crash_point  # a writer's: a reader never loads it

        dirs: set[Path] = set()
        for h, raw in items:
            path = self.path(h)
            if path.exists():
                os.utime(path)
                continue
            if not path.parent.is_dir():
                path.parent.mkdir(parents=True, exist_ok=True)
                dirs.add(path.parent.parent)
            tmp = temp_name(path)
            write_new(tmp, self.deflate(raw), fsync=self.fsync, mode=0o444)
            crash_point("objects:temp-written")
            os.replace(tmp, path)
            dirs.add(path.parent)
        if self.fsync:
            for d in dirs:
                fsync_dir(d)

    def __iter__(self) -> Iterator[Hash]:
        for shard in _shards(self.root):
            for entry in os.scandir(shard):
                if len(entry.name) == 62 and not entry.name.startswith("."):
                    try:
                        yield Hash.from_hex(shard.name + entry.name)
                    except BadInput:
                        continue

    def _candidates(self, prefix: str) -> Iterable[Hash]:
        shard = self.root / prefix[:2]
        if not shard.is_dir():
            return []
        rest = prefix[2:]
        names = [e.name for e in os.scandir(shard)]
        return [Hash.from_hex(prefix[:2] + n) for n in names if n.startswith(rest) and len(n) == 62]

    def delete(self, h: Hash) -> None:
        self.path(h).unlink(missing_ok=True)

    def mtime(self, h: Hash) -> float:
        try:
            return self.path(h).stat().st_mtime
        except FileNotFoundError:
            raise NotFound(f"no object {h.hex()}", id=h) from None


def _shards(root: Path) -> Iterator[Path]:
    if not root.is_dir():
        return
    for entry in sorted(os.scandir(root), key=lambda e: e.name):
        if len(entry.name) == 2 and entry.is_dir():
            yield Path(entry.path)
