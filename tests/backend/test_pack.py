"""The pack format: round trips, deltas and dictionaries, the index, and damage found and contained."""

from __future__ import annotations

import os
import random
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reelstore.backend.disk_store import DiskObjectStore
from reelstore.backend.packs.pack import Pack, scan_pack
from reelstore.backend.packs.pack_item import PackItem, PackOptions
from reelstore.backend.packs.pack_verify import verify_pack
from reelstore.backend.packs.pack_write import write_pack
from reelstore.errors import NotFound, StorageError
from reelstore.objects import Blob, Hash, Record, Tree


def versioned(files: int = 6, versions: int = 8, seed: int = 1) -> list[tuple[Blob, str]]:
    rnd = random.Random(seed)
    words = [f"word{i}" for i in range(300)]
    out = []
    for f in range(files):
        text = [rnd.choice(words) for _ in range(400)]
        for _ in range(versions):
            text[rnd.randrange(len(text))] = rnd.choice(words)
            out.append((Blob(" ".join(text).encode()), f"f{f}.txt"))
    return out


def small_records(n: int) -> list[Record]:
    return [Record(None, Tree(0, ()).id, author="ann", message=f"change {i}", time=i) for i in range(n)]


def make_pack(tmp_path: Path, objs, hints=None, **opts) -> Pack:
    hints = hints or {}
    items = [PackItem(o.id, o.encode(), 1000 + i, hints.get(o.id, "")) for i, o in enumerate(objs)]
    result = write_pack(tmp_path / "pack", items, PackOptions(**opts), fsync=False)
    assert result.count == len({o.id for o in objs})
    return Pack(result.pack_path)


def test_round_trip_with_deltas_and_dictionary(tmp_path: Path) -> None:
    blobs = versioned()
    recs = small_records(400)
    objs = [b for b, _ in blobs] + recs
    pack = make_pack(tmp_path, objs, {b.id: name for b, name in blobs})
    for o in objs:
        assert pack.get_raw(o.id) == o.encode()
    infos, problems = verify_pack(pack)
    assert problems == []
    assert len(infos) == len(objs)
    methods = {i.method for i in infos}
    assert "base" in methods and "dict" in methods
    assert max(i.depth for i in infos) <= PackOptions().depth
    raw_total = sum(len(o.encode()) for o in objs)
    assert pack.size < raw_total / 5


def test_chain_depth_is_bounded(tmp_path: Path) -> None:
    blobs = versioned(files=1, versions=30)
    pack = make_pack(tmp_path, [b for b, _ in blobs], {b.id: n for b, n in blobs}, depth=3)
    infos, problems = verify_pack(pack)
    assert problems == [] and max(i.depth for i in infos) == 3


def test_index_lookup_mtimes_and_absent(tmp_path: Path) -> None:
    objs = [Blob(bytes([i]) * (i + 1)) for i in range(256)]
    pack = make_pack(tmp_path, objs)
    for i, o in enumerate(objs):
        assert pack.mtime(o.id) == 1000 + i
        assert o.id in pack
    assert Blob(b"absent").id not in pack
    assert sorted(pack.ids()) == sorted(o.id for o in objs)
    with pytest.raises(KeyError):
        pack.get_raw(Blob(b"absent").id)


def _index(tmp_path: Path, ids: list[bytes]):
    from reelstore.backend.packs.pack_index import PackIndex, index_bytes

    path = tmp_path / "t.idx"
    path.write_bytes(index_bytes([(Hash(h), 10 * n, n, n) for n, h in enumerate(ids)], b"\0" * 32))
    return PackIndex(path)


def test_index_search_skips_a_match_straddling_two_ids(tmp_path: Path) -> None:
    a, b = b"\x05" * 32, b"\x05" * 16 + b"\x06" * 16
    straddler = (a + b)[24:56]
    assert straddler not in (a, b) and straddler[0] == 5
    idx = _index(tmp_path, [a, b])
    assert idx.find(straddler) == -1
    assert idx.find(a) == 0 and idx.find(b) == 1
    assert idx.find(a[:31]) == -1
    idx.close()
    idx = _index(tmp_path, [a, b, straddler])
    assert [idx.find(h) for h in sorted([a, b, straddler])] == [0, 1, 2]
    idx.close()


@pytest.mark.parametrize("spread", [True, False])
def test_index_search_and_position_map_agree_with_the_sorted_ids(tmp_path: Path, spread: bool) -> None:
    """Spread ids fill short fan-out buckets (scanned); ids sharing a first byte make one long bucket
    (bisected down to a run, then scanned)."""
    rnd = random.Random(7)
    ids = sorted({(rnd.randbytes(32) if spread else b"\x00" + rnd.randbytes(31)) for _ in range(3000)})
    idx = _index(tmp_path, ids)
    assert all(idx.find(h) == n for n, h in enumerate(ids))
    assert idx.hex_positions() == {h.hex().encode(): n for n, h in enumerate(ids)}
    for _ in range(200):
        absent = rnd.randbytes(32) if spread else b"\x00" + rnd.randbytes(31)
        assert absent in ids or idx.find(absent) == -1
    idx.close()


def test_scan_pack_recovers_every_object(tmp_path: Path) -> None:
    objs = [b for b, _ in versioned(files=2, versions=4)]
    pack = make_pack(tmp_path, objs)
    scan = scan_pack(pack.path.read_bytes())
    assert {raw for *_, raw in scan} == {o.encode() for o in objs}
    assert scan.trailer == pack.index.pack_checksum


def flip(path: Path, at: int) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0x5A
    path.write_bytes(bytes(data))


def test_flipped_entry_byte_fails_that_object_only(tmp_path: Path) -> None:
    objs = [Blob(f"object number {i} ".encode() * 20) for i in range(20)]
    pack = make_pack(tmp_path, objs)
    infos, _ = verify_pack(pack)
    victim = infos[len(infos) // 2]
    path = pack.path
    pack.close()
    flip(path, victim.offset + victim.packed - 1)
    pack = Pack(path)
    with pytest.raises(StorageError) as exc:
        pack.get_raw(victim.id)
    assert exc.value.code == "E007" and victim.id.hex() in exc.value.message
    dependants = {i.id for i in infos if i.base is not None}
    for o in objs:
        if o.id != victim.id and o.id not in dependants:
            assert pack.get_raw(o.id) == o.encode()
    _, problems = verify_pack(pack)
    assert any("checksum mismatch" in p for p in problems)
    assert any(victim.id.hex() in p for p in problems)


@pytest.mark.parametrize("where", ["ids", "offsets", "crcs", "trailer"])
def test_flipped_index_byte_is_named(tmp_path: Path, where: str) -> None:
    objs = small_records(30)
    pack = make_pack(tmp_path, objs)
    idx = pack.index
    at = {"ids": idx._ids + 40, "offsets": idx._offsets + 7, "crcs": idx._crcs + 3, "trailer": len(idx.map) - 1}[where]
    path = idx.path
    pack.close()
    flip(path, at)
    pack = Pack(path.with_suffix(".pack"))
    _, problems = verify_pack(pack)
    assert any("index checksum mismatch" in p for p in problems)


def test_truncated_pack_and_missing_index_are_refused(tmp_path: Path) -> None:
    objs = small_records(10)
    pack = make_pack(tmp_path, objs)
    path = pack.path
    pack.close()
    data = path.read_bytes()
    path.write_bytes(data[:-10])
    with pytest.raises(StorageError, match="trailer|truncated"):
        Pack(path)
    path.with_suffix(".idx").unlink()
    with pytest.raises(StorageError, match="no index"):
        Pack(path)
    with pytest.raises(StorageError, match="checksum"):
        scan_pack(data[:-10])


def test_disk_store_reads_packs_and_reports_unusable_ones(tmp_path: Path) -> None:
    root = tmp_path / "objects"
    store = DiskObjectStore(root, fsync=False, pack_batch=50)
    objs = small_records(60)
    store.put_many(objs)
    assert len(store.packs()) == 1 and not list(store.loose)
    loose = Blob(b"loose one")
    store.put(loose)
    assert set(store) == {o.id for o in objs} | {loose.id}
    assert store.get(objs[3].id) == objs[3]
    assert store.resolve(objs[3].id.hex()[:8]) == objs[3].id
    assert store.mtime(objs[0].id) > 0
    # Re-putting a packed object freshens it with a loose copy.
    store.put(objs[5])
    assert store.loose.has(objs[5].id)
    pack = store.packs()[0]
    data = pack.path.read_bytes()
    pack.path.write_bytes(data[:-5])
    other = DiskObjectStore(root, fsync=False)
    assert other.problems() and not other.packs()
    with pytest.raises(StorageError, match="unusable"):
        other.get_raw(objs[7].id)
    assert other.get(objs[5].id) == objs[5]
    pack.path.with_suffix(".idx").unlink()
    third = DiskObjectStore(root, fsync=False)
    assert "pack has no index" in third.problems().values()
    with pytest.raises(NotFound):
        DiskObjectStore(tmp_path / "empty", fsync=False).get_raw(loose.id)


def _mapped(directory: Path) -> set[str]:
    """The files of `directory` this process has mapped (a pack and its index are mapped once opened)."""
    with open("/proc/self/maps") as maps:
        return {Path(line.split()[-1]).name for line in maps if str(directory) in line}


def test_a_lookup_opens_packs_newest_first_and_only_as_far_as_it_needs(tmp_path: Path) -> None:
    """Five packs, oldest to newest: reading an object of the newest maps that pack alone; a miss maps
    every one; a damaged older pack is named once a lookup (or problems()) reaches it."""
    root = tmp_path / "objects"
    writer = DiskObjectStore(root, fsync=False)
    groups = [[Blob(b"pack %d object %d" % (k, i)) for i in range(3)] for k in range(5)]
    names = []
    for k, group in enumerate(groups):
        result = writer.add_pack(PackItem(b.id, b.encode(), 1) for b in group)
        stamp = 1_700_000_000 + k * 60
        for suffix in (".pack", ".idx"):
            os.utime(root / "pack" / f"{result.name}{suffix}", (stamp, stamp))
        names.append(result.name)
    oldest = root / "pack" / f"{names[0]}.pack"
    oldest.write_bytes(oldest.read_bytes()[:-5])
    reader = DiskObjectStore(root, fsync=False)
    assert reader.get(groups[4][1].id) == groups[4][1]
    assert _mapped(root) == {f"{names[4]}.pack", f"{names[4]}.idx"}
    assert reader.get(groups[2][0].id) == groups[2][0]
    assert _mapped(root) == {f"{n}{s}" for n in names[2:] for s in (".pack", ".idx")}
    with pytest.raises(StorageError, match="unusable"):
        reader.get_raw(groups[0][0].id)  # in the damaged pack: every other one was tried
    assert _mapped(root) == {f"{n}{s}" for n in names[1:] for s in (".pack", ".idx")}
    assert list(reader.problems()) == [f"{names[0]}.pack"]
    assert [p.name for p in reader.packs()] == names[:0:-1]


def test_reader_finds_objects_moved_into_a_new_pack(tmp_path: Path) -> None:
    root = tmp_path / "objects"
    reader = DiskObjectStore(root, fsync=False)
    writer = DiskObjectStore(root, fsync=False)
    objs = small_records(5)
    writer.put_many(objs)
    assert reader.get(objs[0].id) == objs[0]
    writer.add_pack(PackItem(o.id, o.encode(), 1) for o in objs)
    for o in objs:
        writer.delete(o.id)
    assert all(reader.has(o.id) for o in objs)
    assert reader.get(objs[4].id) == objs[4]


def test_a_pack_renamed_in_within_the_clock_tick_of_a_scan_is_found(tmp_path: Path) -> None:
    """The pack directory's stamp moves a clock tick at a time: a pack written just after a reader's
    scan, in the same tick, leaves the stamp unchanged; the reader's miss must rescan anyway."""
    root = tmp_path / "objects"
    reader, writer = DiskObjectStore(root, fsync=False), DiskObjectStore(root, fsync=False)
    first, later = Blob(b"first"), Blob(b"written in the same tick")
    writer.add_pack([PackItem(first.id, first.encode(), 1)])
    assert reader.get_raw(first.id) == first.encode()
    stamp = (root / "pack").stat().st_mtime_ns
    writer.add_pack([PackItem(later.id, later.encode(), 1)])
    os.utime(root / "pack", ns=(stamp, stamp))
    assert reader.get_raw(later.id) == later.encode()


def _read_while_the_index_is_away(root: Path, content: bytes, away: Callable[[Path], Path], seconds: float) -> None:
    """Write a pack, move its index to `away(index)`, and read its object from a fresh reader while a
    timer moves the index back after `seconds`: the read must wait and answer, not call it damaged."""
    writer = DiskObjectStore(root, fsync=False)
    blob = Blob(content)
    result = writer.add_pack([PackItem(blob.id, blob.encode(), 1)])
    assert result.idx_path is not None
    moved = away(result.idx_path)
    result.idx_path.rename(moved)
    reader = DiskObjectStore(root, fsync=False)
    assert "pack has no index" in reader.problems().values()
    later = threading.Timer(seconds, moved.rename, [result.idx_path])
    later.start()
    try:
        assert reader.get_raw(blob.id) == blob.encode()
    finally:
        later.join(5)


def test_a_miss_waits_for_the_index_of_a_pack_being_renamed_in(tmp_path: Path) -> None:
    """A writer renames its pack, then its index: a reader in between (gc's fence reading an in-flight
    write) must wait for the index, not call the object damaged."""
    _read_while_the_index_is_away(
        tmp_path / "objects", b"in a pack whose index is on its way", lambda idx: idx.with_name("elsewhere"), 0.03
    )


def test_a_miss_waits_as_long_as_a_live_writer_holds_the_index_on_its_way(tmp_path: Path) -> None:
    """A loaded machine can keep a writer between renaming its pack and its index much longer than the
    brief wait (200 ms) a miss allows any index-less pack: while the pack's writer lives and holds its
    temporary index, the reader keeps waiting (gc's fence used to call the object damaged: a false E007)."""
    from reelstore.backend.fileio import temp_name

    # temp_name carries this process's pid: a live writer between its two renames
    _read_while_the_index_is_away(
        tmp_path / "objects", b"in a pack whose slow writer still holds its index", temp_name, 1.0
    )


def test_an_imported_pack_is_never_seen_without_an_index_or_a_live_writers_temporary_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`reel index-pack` writes the index under its temporary name before the pack is renamed in: at
    the moment the pack appears, a reader finds a live writer's temporary index and waits for it."""
    from reelstore.backend.packs import pack_import

    root = tmp_path / "objects"
    store = DiskObjectStore(root, fsync=False)
    blob = Blob(b"imported")
    store.add_pack([PackItem(blob.id, blob.encode(), 1)])
    (source,) = (root / "pack").glob("*.pack")
    data = source.read_bytes()
    for p in (root / "pack").iterdir():
        p.unlink()
    seen: list[list[str]] = []
    real = os.replace

    def replace(src, dst):  # noqa: ANN001, ANN202  (records the directory as the pack lands)
        real(src, dst)
        if str(dst).endswith(".pack"):
            seen.append(sorted(n for n in os.listdir(root / "pack")))

    monkeypatch.setattr(os, "replace", replace)
    path, _, _ = pack_import.import_pack(root / "pack", lambda f: f.write(data))
    monkeypatch.undo()
    assert len(seen) == 1 and any(n.startswith(f".tmp-{path.stem}.idx-{os.getpid()}-") for n in seen[0]), seen
    assert DiskObjectStore(root, fsync=False).get_raw(blob.id) == blob.encode()


@pytest.fixture(scope="module")
def packed_store(tmp_path_factory):
    from reelstore.backend.repo import Repo
    from reelstore.maintenance.gc import gc

    repo = Repo.init(tmp_path_factory.mktemp("flip"))
    rec = repo.refs["refs/heads/main"]
    for b, name in versioned(files=3, versions=4):
        tree = Tree(0, ((name, b.id),))
        new = Record(rec, tree.id, message=name)
        repo.objects.put_many([b, tree, new])
        repo.refs.set("refs/heads/main", new.id, rec)
        rec = new.id
    gc(repo, "now")
    pack = repo.objects.packs()[0]
    return repo.path, pack.path, pack.index.path


@settings(max_examples=40, deadline=None)
@given(which=st.sampled_from(["pack", "idx"]), where=st.floats(0, 1, exclude_max=True), bit=st.integers(0, 7))
def test_any_flipped_bit_is_caught_by_fsck(packed_store, which: str, where: float, bit: int) -> None:
    from reelstore.backend.repo import Repo
    from reelstore.maintenance.fsck import fsck

    root, pack_path, idx_path = packed_store
    path = pack_path if which == "pack" else idx_path
    os.chmod(path, 0o644)
    data = bytearray(path.read_bytes())
    at = int(where * len(data))
    data[at] ^= 1 << bit
    path.write_bytes(bytes(data))
    try:
        report = fsck(Repo.open(root))
        assert not report.clean and report.problems
        assert any(path.name in p or pack_path.name in p for p in report.problems)
    finally:
        data[at] ^= 1 << bit
        path.write_bytes(bytes(data))
    assert fsck(Repo.open(root)).clean


def test_frame_declaring_a_huge_size_is_refused_before_allocation(tmp_path: Path) -> None:
    import zlib

    import blake3
    import zstandard

    from reelstore.backend.packs.pack import PACK_HEADER, PACK_MAGIC, ZSTD, _varint
    from reelstore.backend.packs.pack_index import VERSION, index_bytes

    blob = Blob(b"z" * 100)
    params = zstandard.ZstdCompressionParameters.from_level(
        3, format=zstandard.FORMAT_ZSTD1_MAGICLESS, write_content_size=True
    )
    payload = zstandard.ZstdCompressor(compression_params=params).compress(blob.encode()[5:])
    head = bytes((1, ZSTD)) + _varint(len(blob.encode()) - 5) + _varint(len(payload))
    data = PACK_HEADER.pack(PACK_MAGIC, VERSION, 1, 0) + head + payload
    trailer = blake3.blake3(data).digest()
    pack = tmp_path / "pack-x.pack"
    pack.write_bytes(data + trailer)
    crc = zlib.crc32(head + payload)
    pack.with_suffix(".idx").write_bytes(index_bytes([(blob.id, PACK_HEADER.size, crc, 0)], trailer))
    with pytest.raises(StorageError, match="declares a content size"):
        Pack(pack).get_raw(blob.id)


def test_a_large_put_packs_only_what_is_not_already_loose(tmp_path) -> None:
    from reelstore.backend.repo import Repo
    from reelstore.objects import Blob

    repo = Repo.init(tmp_path)
    store = repo.objects
    old = [Blob(b"old %d" % i) for i in range(5)]
    store.put_many(old)
    assert all(store.loose.has(o.id) for o in old)
    new = [Blob(b"new %d" % i) for i in range(store.pack_batch)]
    store.put_many(old + new)
    packed = {h for pack in store.packs() for h in pack.ids()}
    assert packed == {o.id for o in new}
    assert all(store.loose.has(o.id) for o in old)


def test_a_chain_past_the_limit_is_refused_when_indexed_and_reported_by_verify(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pack chained 20 deep read by a reader whose limit is 10: reading in order keeps each base
    cached, which used to hide the depth from index-pack and verify-pack while a cold read failed."""
    from reelstore.backend.packs import pack as packmod
    from reelstore.backend.packs.pack_import import index_file

    blobs = versioned(files=1, versions=20)
    pack = make_pack(tmp_path, [b for b, _ in blobs], {b.id: n for b, n in blobs}, depth=20)
    assert max(i.depth for i in verify_pack(pack)[0]) >= 19
    monkeypatch.setattr(packmod, "MAX_CHAIN", 10)
    cold = Pack(pack.path)
    with pytest.raises(StorageError, match="base chain longer than 10"):
        cold.get_raw(blobs[-1][0].id)
    _, problems = verify_pack(Pack(pack.path))
    assert any("base chain longer than 10" in p for p in problems), problems
    with pytest.raises(StorageError, match="base chain longer than 10"):
        index_file(pack.path)
