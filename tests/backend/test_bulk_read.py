"""BulkReader (cat-file --batch's reads): the same answers as a full decode, from packs, loose files and
an open write batch, with damage refused as E007."""

from __future__ import annotations

import gc
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from pack_objects import every_method

from reelstore.backend.disk_store import DiskObjectStore
from reelstore.backend.packs.bulk_read import BulkReader
from reelstore.backend.packs.pack_index import index_columns
from reelstore.backend.packs.pack_item import PackItem, PackOptions
from reelstore.backend.packs.pack_write import write_pack_stream
from reelstore.backend.repo import Repo
from reelstore.cli.main import cli
from reelstore.errors import StorageError
from reelstore.objects import Blob, Hash, Record, Tree


def _expected(obj: Blob | Tree | Record) -> tuple[str, bytes]:
    return obj.kind, obj.content()


def test_packed_and_loose_objects_read_as_a_full_decode_does(tmp_path: Path) -> None:
    store = DiskObjectStore(tmp_path / "objects", fsync=False)
    objs = every_method()
    result = store.add_pack(
        (PackItem(o.id, o.encode(), 1, "f" if o.kind == "blob" else "") for o in objs), PackOptions()
    )
    assert result.methods["dict"] and result.methods["base"]
    loose = [Blob(b"loose %d" % i) for i in range(5)]
    store.put_many(loose)
    reader = BulkReader(store)
    # Twice over: early reads search the pack's index, later ones (past an eighth of its ids) its map.
    for _ in range(2):
        for obj in [*objs, *loose]:
            got = reader.read(obj.id)
            assert got is not None and (got[0], bytes(got[1])) == _expected(obj)
    assert reader.read(Blob(b"absent").id) is None


def test_a_pack_written_after_the_reader_opened_is_read(tmp_path: Path) -> None:
    store = DiskObjectStore(tmp_path / "objects", fsync=False)
    reader = BulkReader(store)
    later = [Blob(b"later %d" % i) for i in range(3)]
    DiskObjectStore(tmp_path / "objects", fsync=False).add_pack(PackItem(b.id, b.encode(), 1) for b in later)
    assert [bytes(reader.read(b.id)[1]) for b in later] == [b.data for b in later]  # type: ignore[index]


def test_objects_pending_in_this_threads_write_batch_are_read(tmp_path: Path) -> None:
    store = DiskObjectStore(tmp_path / "objects", fsync=False)
    with store.batch():
        blob = Blob(b"pending")
        store.put(blob)
        got = BulkReader(store).read(blob.id)
        assert got is not None and bytes(got[1]) == b"pending"


def test_an_entry_whose_content_does_not_hash_to_its_id_is_refused(tmp_path: Path) -> None:
    """The entry's CRC is right (it was written so): only hashing what is returned catches it."""
    store = DiskObjectStore(tmp_path / "objects", fsync=False)
    liar, truth = Blob(b"what the id says"), Blob(b"what the pack holds")
    # Written past the writer's own read-back check (which would refuse it), as damage would be.
    chunks: list[bytes] = []
    columns, trailer, _ = write_pack_stream(chunks.append, [PackItem(liar.id, truth.encode(), 1)])
    store.pack_dir.mkdir(parents=True)
    (store.pack_dir / f"pack-{trailer.hex()}.pack").write_bytes(b"".join(map(bytes, chunks)))
    (store.pack_dir / f"pack-{trailer.hex()}.idx").write_bytes(index_columns(*columns, trailer))
    store.refresh(force=True)
    with pytest.raises(StorageError) as exc:
        BulkReader(store).read(liar.id)
    assert exc.value.code == "E007" and "does not hash" in exc.value.message


def test_a_damaged_loose_object_is_refused(tmp_path: Path) -> None:
    store = DiskObjectStore(tmp_path / "objects", fsync=False)
    blob = Blob(b"soon damaged")
    store.put(blob)
    other = Blob(b"something else")
    path = Path(store.loose_path(blob.id))
    path.chmod(0o644)
    path.write_bytes(Path(store.loose_path(store.put(other))).read_bytes())
    with pytest.raises(StorageError) as exc:
        BulkReader(store).read(Hash(blob.id))
    assert exc.value.code == "E007"


def test_a_blob_whose_body_is_not_one_msgpack_bin_is_refused(tmp_path: Path) -> None:
    """Bytes that hash to their id but no decode would accept (a writer bypassing the codec)."""
    store = DiskObjectStore(tmp_path / "objects", fsync=False)
    raw = b"blob\x00\xc4\x05abc"
    store.add_pack([PackItem(Hash.of(raw), raw, 1)])
    with pytest.raises(StorageError) as exc:
        BulkReader(store).read(Hash.of(raw))
    assert exc.value.code == "E007" and "msgpack bin" in exc.value.message


def _names(objs: list[Blob | Tree | Record]) -> list[bytes]:
    return [o.id.hex().encode() for o in objs]


def test_read_names_answers_as_read_does_once_the_pack_is_mapped(tmp_path: Path) -> None:
    """Handed at least an eighth of a pack's ids at once, the reader maps it and answers every id it holds
    (each method, the stored ones by the short way) as `read` does; anything else is left to the caller."""
    store = DiskObjectStore(tmp_path / "objects", fsync=False)
    objs = every_method()
    store.add_pack((PackItem(o.id, o.encode(), 1, "f" if o.kind == "blob" else "") for o in objs), PackOptions())
    loose = Blob(b"loose")
    store.put(loose)
    reader = BulkReader(store)
    odd = [loose.id.hex().encode(), objs[0].id.hex().upper().encode(), b"HEAD", b"", Blob(b"no").id.hex().encode()]
    got = list(reader.read_names([*_names(objs), *odd]))
    assert [(kind.decode(), bytes(content)) for kind, content in got[: len(objs)]] == [_expected(o) for o in objs]
    assert got[len(objs) :] == [None] * len(odd)


def test_read_names_searches_a_pack_until_enough_names_map_it(tmp_path: Path) -> None:
    """A few names are searched for (the pack stays unmapped); past an eighth of its ids, it is mapped."""
    store = DiskObjectStore(tmp_path / "objects", fsync=False)
    objs = every_method()
    store.add_pack(PackItem(o.id, o.encode(), 1) for o in objs)
    reader = BulkReader(store)
    few = objs[:3]
    assert [(k.decode(), bytes(c)) for k, c in reader.read_names(_names(few))] == [_expected(o) for o in few]  # type: ignore[misc]
    assert reader._packs[0].positions is None
    for at in range(3, len(objs), 3):  # three at a time: never enough alone to map the pack
        part = objs[at : at + 3]
        assert [(k.decode(), bytes(c)) for k, c in reader.read_names(_names(part))] == [_expected(o) for o in part]  # type: ignore[misc]
    assert reader._packs[0].positions is not None


def _one_entry_pack(store: DiskObjectStore, h: Hash, raw: bytes, damage: int | None = None) -> None:
    """A pack holding `raw` under id `h`, written past the writer's own checks (as damage would be), with
    the byte at `damage` (from the entry's start) flipped."""
    chunks: list[bytes] = []
    columns, trailer, _ = write_pack_stream(chunks.append, [PackItem(h, raw, 1)])
    data = bytearray(b"".join(map(bytes, chunks)))
    if damage is not None:
        data[columns[1][0] + damage] ^= 0x01
    store.pack_dir.mkdir(parents=True, exist_ok=True)
    (store.pack_dir / f"pack-{trailer.hex()}.pack").write_bytes(bytes(data))
    (store.pack_dir / f"pack-{trailer.hex()}.idx").write_bytes(index_columns(*columns, trailer))
    store.refresh(force=True)


@pytest.mark.parametrize("case", ["liar", "flipped", "not one bin"])
def test_read_names_refuses_damage_as_read_does(tmp_path: Path, case: str) -> None:
    """A stored entry whose content does not hash to its id (its CRC right), one with a flipped payload
    byte (its CRC wrong), and a blob body that hashes right but is no single msgpack bin: E007 each."""
    store = DiskObjectStore(tmp_path / "objects", fsync=False)
    truth = Blob(b"what the pack holds, stored as it is")
    if case == "liar":
        h, raw, damage = Blob(b"what the id says").id, truth.encode(), None
    elif case == "flipped":
        h, raw, damage = truth.id, truth.encode(), 12
    else:
        raw = b"blob\x00\xc4\x05abc"
        h, damage = Hash.of(raw), None
    _one_entry_pack(store, Hash(h), raw, damage)
    with pytest.raises(StorageError) as exc:
        list(BulkReader(store).read_names([h.hex().encode()]))
    assert exc.value.code == "E007"
    assert {"liar": "does not hash", "flipped": "checksum", "not one bin": "msgpack bin"}[case] in exc.value.message


def _packed_repo(tmp_path: Path) -> tuple[list[Blob | Tree | Record], Blob]:
    """A store whose objects are packed but one loose blob; returned with the packed objects."""
    repo = Repo.init(tmp_path)
    objs = every_method()
    repo.objects.add_pack(PackItem(o.id, o.encode(), 1) for o in objs)
    loose = Blob(b"loose, not packed")
    repo.objects.put(loose)
    return objs, loose


def test_a_reader_of_a_repo_opens_its_object_store_only_for_what_the_packs_lack(tmp_path: Path) -> None:
    objs, loose = _packed_repo(tmp_path)
    repo = Repo.open(tmp_path)
    reader = BulkReader.of_repo(repo)
    got = list(reader.read_names(_names(objs)))
    assert [(k.decode(), bytes(c)) for k, c in got] == [_expected(o) for o in objs]  # type: ignore[misc]
    assert repo._objects is None
    found = reader.read(loose.id)
    assert found is not None and bytes(found[1]) == loose.data and repo._objects is not None


_BATCH_MODULES = """\
import gc, sys
from reelstore.cli.main import main
try:
    main(["cat-file", "--batch-check"])
finally:
    sys.stderr.write(f"frozen={gc.get_freeze_count()}\\n")
"""


def test_a_batch_of_packed_objects_answers_each_name_in_a_fresh_process(tmp_path: Path, read_path: str) -> None:
    objs, loose = _packed_repo(tmp_path)
    names = b"".join(o.id.hex().encode() + b"\n" for o in objs)
    proc = subprocess.run(
        [sys.executable, "-c", _BATCH_MODULES], input=names, capture_output=True, cwd=tmp_path, timeout=60
    )
    assert proc.stdout.splitlines() == [
        b"%s %s %d" % (o.id.hex().encode(), o.kind.encode(), len(o.content())) for o in objs
    ]
    frozen = proc.stderr.decode().split()[0]
    assert frozen != "frozen=0"  # its own process: what it loaded is frozen until the exit


def test_a_pack_the_reader_cannot_open_is_left_to_the_store(tmp_path: Path) -> None:
    """Its objects are read (or refused) as the store reads them: here an index that is not one."""
    objs, _ = _packed_repo(tmp_path)
    idx = next((tmp_path / ".reel" / "objects" / "pack").glob("*.idx"))
    idx.chmod(0o644)
    idx.write_bytes(b"XXXX" + idx.read_bytes()[4:])
    errors = []
    for reader in (BulkReader.of_repo(Repo.open(tmp_path)), BulkReader(Repo.open(tmp_path).objects)):
        assert reader._packs == []
        with pytest.raises(StorageError) as exc:
            reader.read(objs[0].id)
        errors.append(exc.value.message)
    assert errors[0] == errors[1] and "not a reel pack index" in errors[0]


def test_a_batch_run_inside_another_process_freezes_nothing(tmp_path: Path, read_path: str) -> None:
    """Embedded (here click's test runner, stdout captured in memory), the batch leaves the caller's
    collector alone: freezing would pin the caller's garbage for good."""
    objs, _ = _packed_repo(tmp_path)
    before = gc.get_freeze_count()
    out = CliRunner().invoke(
        cli,
        ["-C", str(tmp_path), "cat-file", "--batch-check"],
        input=b"".join(o.id.hex().encode() + b"\n" for o in objs),
    )
    assert out.exit_code == 0 and len(out.stdout_bytes.splitlines()) == len(objs)
    assert gc.get_freeze_count() == before == 0
