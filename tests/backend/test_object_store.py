"""Object stores: the memory, loose and Postgres backends behave alike, and a damaged file is E007, never content."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import zstandard

from reelstore.backend.object_store import LooseObjectStore, MemoryObjectStore, ObjectStore
from reelstore.errors import BadInput, NotFound, StorageError
from reelstore.objects import Blob, Hash, Record, Tree


@pytest.fixture(params=["memory", "loose", "postgres"])
def store(request, tmp_path: Path) -> ObjectStore:
    if request.param == "memory":
        return MemoryObjectStore()
    if request.param == "postgres":
        from reelstore.backend.postgres import PgDb, PgObjectStore

        return PgObjectStore(PgDb(request.getfixturevalue("pg_url")))
    return LooseObjectStore(tmp_path / "objects", fsync=False)


def test_put_get_has_iterate(store: ObjectStore):
    blob = Blob(b"hello")
    tree = Tree(0, (("a", blob.id),))
    ids = store.put_many([blob, tree])
    assert ids == [blob.id, tree.id]
    assert store.has(blob.id) and blob.id in store
    assert store.get(blob.id) == blob
    assert store.get(tree.id) == tree
    assert store.get_raw(tree.id) == tree.encode()
    assert set(store) == {blob.id, tree.id}
    assert store.put(blob) == blob.id
    assert len(set(store)) == 2


def test_missing_is_e001(store: ObjectStore):
    missing = Hash(b"\x07" * 32)
    assert not store.has(missing)
    with pytest.raises(NotFound):
        store.get(missing)
    with pytest.raises(NotFound):
        store.resolve(missing.hex())


def test_resolve_prefixes(store: ObjectStore):
    blobs = [Blob(str(i).encode()) for i in range(300)]
    store.put_many(blobs)
    target = blobs[17].id.hex()
    assert store.resolve(target) == blobs[17].id
    unique = next(n for n in range(4, 65) if sum(b.id.hex().startswith(target[:n]) for b in blobs) == 1)
    assert store.resolve(target[:unique]) == blobs[17].id
    shared = {}
    for b in blobs:
        shared.setdefault(b.id.hex()[:4], []).append(b)
    collide = next((p for p, bs in shared.items() if len(bs) > 1), None)
    if collide is not None:
        with pytest.raises(BadInput, match="ambiguous"):
            store.resolve(collide)
    for bad in ("abc", "ABCD", "xyz1", target + "0"):
        with pytest.raises(BadInput):
            store.resolve(bad)


def test_ambiguous_prefix_with_forced_collision(tmp_path: Path):
    store = LooseObjectStore(tmp_path / "o", fsync=False)
    found: dict[str, Blob] = {}
    for i in range(100_000):
        b = Blob(i.to_bytes(4, "big"))
        prev = found.setdefault(b.id.hex()[:4], b)
        if prev is not b:
            store.put_many([prev, b])
            with pytest.raises(BadInput, match="ambiguous"):
                store.resolve(b.id.hex()[:4])
            return
    raise AssertionError("no 4-digit collision in 100000 blobs")


@pytest.fixture
def loose(tmp_path: Path) -> LooseObjectStore:
    return LooseObjectStore(tmp_path / "objects", fsync=False)


def _damage(loose: LooseObjectStore, h: Hash, data: bytes) -> None:
    path = loose.path(h)
    path.chmod(0o644)
    path.write_bytes(data)


def test_loose_layout_and_compression(loose: LooseObjectStore):
    blob = Blob(b"a" * 10_000)
    h = loose.put(blob)
    path = loose.root / h.hex()[:2] / h.hex()[2:]
    assert path.is_file()
    assert path.stat().st_size < 1000
    assert path.stat().st_mode & 0o222 == 0
    assert zstandard.ZstdDecompressor().decompress(path.read_bytes()) == blob.encode()


@pytest.mark.parametrize(
    "mangle",
    [
        lambda data: data[: len(data) // 2],  # torn
        lambda data: data[:-1] + bytes([data[-1] ^ 1]),  # flipped checksum byte
        lambda data: data + data,  # trailing frame
        lambda data: data + b"\x00",  # trailing garbage
        lambda data: b"",  # empty file
        lambda data: b"not zstd at all",
        lambda data: zstandard.ZstdCompressor(write_content_size=False).compress(Blob(b"x" * 100).encode()),
        lambda data: zstandard.ZstdCompressor().compress(Blob(b"other").encode()),  # someone else's content
        lambda data: zstandard.ZstdCompressor().compress(b"\x00" * (65 * 1024 * 1024)),  # oversized frame
    ],
)
def test_damaged_loose_object_is_e007(loose: LooseObjectStore, mangle):
    blob = Blob(b"x" * 100)
    h = loose.put(blob)
    _damage(loose, h, mangle(loose.path(h).read_bytes()))
    with pytest.raises(StorageError):
        loose.get(h)
    with pytest.raises(StorageError):
        loose.get_raw(h)


def test_every_single_flipped_byte_is_e007(loose: LooseObjectStore):
    blob = Blob(b"payload " * 20)
    h = loose.put(blob)
    original = loose.path(h).read_bytes()
    for i in range(len(original)):
        data = bytearray(original)
        data[i] ^= 0x20
        _damage(loose, h, bytes(data))
        with pytest.raises(StorageError):
            loose.get(h)
    _damage(loose, h, original)
    assert loose.get(h) == blob


def test_undecodable_content_under_its_own_hash_is_e007(loose: LooseObjectStore):
    raw = b"blob\x00\xcd\x00\x01"  # hashes to itself but is not canonical
    h = Hash.of(raw)
    path = loose.path(h)
    path.parent.mkdir(parents=True)
    path.write_bytes(zstandard.ZstdCompressor().compress(raw))
    assert loose.get_raw(h) == raw
    with pytest.raises(StorageError):
        loose.get(h)


def test_temp_and_junk_files_are_not_objects(loose: LooseObjectStore):
    h = loose.put(Blob(b"real"))
    shard = loose.path(h).parent
    (shard / f".tmp-{h.hex()[2:]}-1-abcd").write_bytes(b"partial")
    (shard / "short").write_bytes(b"x")
    (loose.root / "zz").mkdir()
    (loose.root / "pack").mkdir()
    assert list(loose) == [h]
    assert loose.resolve(h.hex()[:6]) == h


def test_reput_refreshes_mtime(loose: LooseObjectStore):
    blob = Blob(b"old")
    h = loose.put(blob)
    past = time.time() - 3600
    os.utime(loose.path(h), (past, past))
    assert loose.mtime(h) < time.time() - 3000
    loose.put(blob)
    assert loose.mtime(h) > time.time() - 60


def test_delete(store: ObjectStore):
    h = store.put(Blob(b"gone"))
    store.delete(h)
    assert not store.has(h)


def test_mtime_is_when_written_and_e001_when_absent(store: ObjectStore):
    before = time.time()
    h = store.put(Blob(b"dated"))
    assert before - 2 <= store.mtime(h) <= time.time() + 2
    store.delete(h)
    with pytest.raises(NotFound):
        store.mtime(h)


class Minimal(ObjectStore):
    """A backend that implements the six primitives and nothing else, as a new backend starts."""

    def __init__(self) -> None:
        self.held: dict[Hash, tuple[bytes, float]] = {}

    def has(self, h: Hash) -> bool:
        return h in self.held

    def get_raw(self, h: Hash) -> bytes:
        if h not in self.held:
            raise NotFound(f"no object {h.hex()}", id=h)
        return self.held[h][0]

    def _store(self, items: list[tuple[Hash, bytes]]) -> None:
        for h, raw in items:
            self.held[h] = (raw, time.time())

    def __iter__(self):
        return iter(list(self.held))

    def mtime(self, h: Hash) -> float:
        if h not in self.held:
            raise NotFound(f"no object {h.hex()}", id=h)
        return self.held[h][1]

    def delete(self, h: Hash) -> None:
        self.held.pop(h, None)


def test_the_interface_names_no_pack_or_loose_file():
    """The seam is narrow: a backend is asked for objects, batches, gc and fsck, never for packs, loose
    files or the disk layout's hooks (those are the disk backend's own)."""
    hooks = {
        "packs",
        "problems",
        "refresh",
        "loose_ids",
        "loose_files",
        "keeps_files",
        "remove_if_unchanged",
        "remove_pack",
        "sweep_temp",
        "get_loose",
        "put_loose",
        "add_pack",
        "import_pack",
        "counts",
        "scratch_dir",
    }
    assert hooks.isdisjoint(dir(ObjectStore))
    assert {"gc", "fsck", "batch", "get", "put_many", "resolve"} <= set(dir(ObjectStore))


def test_a_backend_of_the_primitives_alone_collects_and_checks_object_by_object():
    """gc through the interface: the backend lists, calls the mark, and drops only what is unreachable,
    not in flight and older than the cutoff; fsck re-hashes and decodes every object and names damage."""
    store = Minimal()
    live, young, old, flight = Blob(b"live"), Blob(b"young"), Blob(b"old"), Blob(b"in flight")
    store.put_many([live, young, old, flight])
    store.held[old.id] = (store.held[old.id][0], 1000.0)
    store.held[flight.id] = (store.held[flight.id][0], 1000.0)
    marked = []

    class Walked:
        reachable = {live.id}
        inflight = {flight.id}
        kinds: dict[Hash, str] = {}
        hints: dict[Hash, str] = {}

    def mark(leaves, read):
        marked.append(set(store))  # called after the listing, with every id still there
        return Walked()

    dry = store.gc(mark, 2000.0, dry_run=True, now=3000.0)
    assert dry.pruned_ids == [old.id] and dry.kept_recent == 2 and store.has(old.id)
    report = store.gc(mark, 2000.0, now=3000.0)
    assert report.pruned_ids == [old.id] and report.reachable == 1 and report.candidates == 4
    assert not store.has(old.id) and all(store.has(b.id) for b in (live, young, flight))
    assert store.gc(mark, None, now=3000.0).pruned == 0 and len(marked) == 3
    check = store.fsck()
    assert check.problems == [] and check.ids == {live.id, young.id, flight.id} and check.loose == 3
    store.held[young.id] = (b"blob\x00tampered", store.held[young.id][1])
    assert [p.split(":")[0] for p in store.fsck().problems] == [f"loose {young.id.hex()}"]


def test_a_backend_must_implement_the_primitives():
    class Partial(ObjectStore):
        def has(self, h: Hash) -> bool:
            return False

    with pytest.raises(TypeError):
        Partial()  # type: ignore[abstract]


def test_loose_store_survives_reopen(tmp_path: Path):
    a = LooseObjectStore(tmp_path / "objects")
    rec = Record(None, Tree(0, ()).id, author="t", message="m", time=1)
    a.put(rec)
    assert LooseObjectStore(tmp_path / "objects").get(rec.id) == rec


def test_kind_reads_the_tag_the_hash_covers(store: ObjectStore):
    """`kind` answers what `get(h).kind` does, from the verified bytes' tag alone; a tag that names no
    kind is E007, as is a missing tag, though the bytes hash to their id."""
    blob, tree = Blob(b"x"), Tree(0, (("a", Blob(b"x").id),))
    rec = Record(None, tree.id, author="a", message="m", time=1)
    store.put_many([blob, tree, rec])
    assert [store.kind(o.id) for o in (blob, tree, rec)] == [store.get(o.id).kind for o in (blob, tree, rec)]
    for raw in (b"bogus\x00\x90", b"no tag at all", b"\x00body"):
        h = Hash.of(raw)
        store._store([(h, raw)])
        with pytest.raises(StorageError, match="damaged"):
            store.kind(h)
    with pytest.raises(NotFound):
        store.kind(Hash(b"\x07" * 32))
