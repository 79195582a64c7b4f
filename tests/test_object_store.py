"""Object stores: the memory, loose and Postgres backends behave alike, and a damaged file is E007, never content."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import zstandard

from reelstore.errors import BadInput, NotFound, StorageError
from reelstore.objects import Blob, Hash, Record, Tree
from reelstore.storage.object_store import LooseObjectStore, MemoryObjectStore, ObjectStore


@pytest.fixture(params=["memory", "loose", "postgres"])
def store(request, tmp_path: Path) -> ObjectStore:
    if request.param == "memory":
        return MemoryObjectStore()
    if request.param == "postgres":
        from reelstore.storage.postgres import PgDb, PgObjectStore

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


def test_put_raw_decodes_first(store: ObjectStore):
    assert store.put_raw(Blob(b"x").encode()) == Blob(b"x").id
    with pytest.raises(BadInput):
        store.put_raw(b"blob\x00\xc4\x05hi")
    with pytest.raises(BadInput):
        store.put_raw(b"nonsense\x00\xc0")


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


def test_a_store_without_packs_answers_for_what_it_holds(store: ObjectStore):
    """The maintenance interface on a store that keeps no pack files: no packs, nothing unusable,
    every object held loose, counted as count-objects counts, and adding a pack refused (E014)."""
    blobs = [Blob(b"x" * 3000), Blob(b"y" * 3000)]
    store.put_many(blobs)
    assert store.packs() == [] and store.problems() == {} and store.refresh(force=True) is False
    assert set(store.loose_ids()) == {b.id for b in blobs}
    assert store.get_loose(blobs[0].id) == blobs[0].encode()
    counts = store.counts()
    assert counts["count"] == 2 and counts["packs"] == 0 and counts["in-pack"] == 0
    if isinstance(store, MemoryObjectStore):
        assert counts["size"] == sum(len(b.encode()) for b in blobs) // 1024
    with pytest.raises(BadInput):
        store.add_pack([])


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
