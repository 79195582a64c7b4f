"""A push's walk (`sync.walk`): every object of the closure the remote lacks, read and verified once,
from a mapped pack in one loop (stored entries inline) or one at a time; the ids the sync state keeps."""

from __future__ import annotations

import os
import struct
import zlib
from pathlib import Path

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reelstore.backend.packs.bulk_read import BulkReader
from reelstore.backend.repo import Repo
from reelstore.errors import BadInput, StorageError
from reelstore.namespace.tree import Namespace
from reelstore.objects import Blob, Hash, Record, Tree, decode
from reelstore.sync.state import SyncState
from reelstore.sync.walk import edges, missing_on_remote


def _store(path: Path, n: int) -> tuple[Repo, list[Blob], Hash]:
    """A store whose trunk names `n` blobs, half noise (the pack holds them stored), half text."""
    repo = Repo.init(path)
    blobs = [Blob(os.urandom(40 + i % 300)) if i % 2 else Blob(b"words and words %d " % i * 9) for i in range(n)]
    repo.objects.put_many(blobs)
    head = repo.refs["refs/heads/main"]
    top = repo.objects.get_as(head, Record)
    root = Namespace(repo.objects).update(top.namespace, {f"f/{i:05}": b.id for i, b in enumerate(blobs)})
    rec = Record(parent=head, namespace=root, effects=None, view=None, author="t", message="m", time=0)
    repo.objects.put(rec)
    repo.refs.set("refs/heads/main", rec.id, head, message="t")
    return repo, blobs, rec.id


def test_the_walk_hands_over_every_object_once_with_its_verified_bytes(tmp_path: Path) -> None:
    repo, blobs, tip = _store(tmp_path / "s", 3000)
    loose = Blob(b"a loose one")
    repo.objects.put(loose)
    got: dict[bytes, tuple[bytes, bool]] = {}

    def take(h: bytes, raw: bytes, stored: bool) -> None:
        assert h not in got
        got[h] = (raw, stored)

    state = SyncState(repo)
    try:
        new = missing_on_remote(repo, state, "r", [tip], take)
        assert sorted(new) == sorted(got) and len(new) == len(set(new))
        assert all(got[h][0] == repo.objects.get_raw(Hash(h)) for h in new)
        assert {b.id for b in blobs} <= set(new)
        # The noise is held stored by the store's pack (read inline), the text compressed (read by the pack).
        assert all(got[b.id][1] for b in blobs[1::2]) and not any(got[b.id][1] for b in blobs[::2])
        # What the remote is known to hold stops the walk: nothing below the tip is read again.
        with state:
            state.add_known("r", new)
        assert missing_on_remote(repo, state, "r", [tip]) == []
        assert state.known("r", [tip, loose.id]) == {tip}
        assert state.known("other", [tip]) == set()
    finally:
        state.close()


def test_a_mapped_read_falls_back_to_the_store_for_what_its_packs_lack(tmp_path: Path) -> None:
    repo, blobs, _ = _store(tmp_path / "s", 1000)
    loose = Blob(b"a loose one")
    repo.objects.put(loose)
    ids = [b.id for b in blobs] + [loose.id]
    got: list[bytes] = []
    BulkReader(repo.objects).read_many(ids, lambda h, raw, stored: got.append(raw), lambda raw: None)
    assert got == [repo.objects.get_raw(h) for h in ids]
    with pytest.raises(StorageError, match="missing from this store"):
        BulkReader(repo.objects).read_many([*ids, Hash(b"\x02" * 32)], lambda *_: None, lambda raw: None)


def _stored_entry(repo: Repo, h: bytes) -> tuple[Path, Path, int, int]:
    """(pack path, index path, entry offset, index position) of `h`, which the pack must hold stored."""
    pack = repo.objects.packs()[0]
    i = pack.index.find(h)
    offset, _ = pack.index.entry(i)
    assert pack.map[offset + 1] == 0  # STORED
    return pack.path, pack.index.path, offset, i


@pytest.mark.parametrize("crc_too", [False, True])
def test_a_damaged_stored_entry_is_refused_even_with_a_matching_crc(tmp_path: Path, crc_too: bool) -> None:
    """A flipped byte in a stored entry read inline is E007, whether or not the index's CRC was
    rewritten to match it: the inline read's BLAKE3 is what catches it."""
    repo, blobs, _ = _store(tmp_path / "s", 1000)
    victim = blobs[501]
    pack_path, idx_path, offset, i = _stored_entry(repo, victim.id)
    data = bytearray(pack_path.read_bytes())
    end = offset + 6 + len(victim.encode()) - 5  # two-byte size and length, the body after the kind tag
    data[end - 3] ^= 0x40
    pack_path.write_bytes(bytes(data))
    if crc_too:
        count = struct.unpack_from(">I", idx_path.read_bytes(), 8)[0]
        idx = bytearray(idx_path.read_bytes())
        at = len(idx) - 2 * 32 - 8 * count - 4 * count + 4 * i  # the CRC column sits before the mtimes
        struct.pack_into(">I", idx, at, zlib.crc32(data[offset:end]))
        idx_path.write_bytes(bytes(idx))
    fresh = Repo.open(tmp_path / "s")
    ids = [b.id for b in blobs]
    with pytest.raises(StorageError, match="damaged") as caught:
        BulkReader(fresh.objects).read_many(ids, lambda *_: None, lambda raw: None)
    assert caught.value.code == "E007" and "does not hash to its id" in caught.value.message


names = st.text(st.characters(blacklist_categories=["Cs"]), min_size=1, max_size=8)


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(names, st.binary(min_size=32, max_size=32).map(Hash), max_size=20), st.integers(0, 3))
def test_edges_of_a_node_are_what_the_decoder_finds(entries: dict[str, Hash], level: int) -> None:
    if level and not entries:
        level = 0
    node = Tree(level=level, entries=tuple(sorted(entries.items())))
    assert list(edges(node.encode())) == list(decode(node.encode()).references())


def test_a_node_not_shaped_as_one_is_left_to_the_decoder() -> None:
    record = Record(parent=None, namespace=Hash(b"\x03" * 32), effects=None, view=None, author="a", message="m", time=1)
    assert list(edges(record.encode())) == list(record.references())
    for body in (
        b"\xc1",
        msgpack.packb({"entries": [["a", b"short"]], "level": 0}),
        msgpack.packb({"entries": 3, "level": 0}),
        msgpack.packb([1, 2]),
    ):
        with pytest.raises(BadInput):
            edges(b"tree\0" + body)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 17, 1024, 1025, 3001])
def test_known_ids_go_to_sqlite_and_back_in_one_statement_each(tmp_path: Path, n: int) -> None:
    """The ids split in SQLite from one blob: every one of them, exactly once, whatever their count."""
    repo = Repo.init(tmp_path / "s")
    ids = [os.urandom(32) for _ in range(n + 5)]
    state = SyncState(repo)
    try:
        with state:
            state.add_known("r", ids[:n])
            state.add_known("r", ids[: n // 2])  # again: ignored
        assert state.known("r", ids) == set(ids[:n])
        assert state.known("other", ids) == set() and state.knows_any("r") and not state.knows_any("other")
        assert state.db.execute("SELECT count(*) FROM known WHERE remote = 'r'").fetchone() == (n,)
    finally:
        state.close()


def test_a_pack_past_the_map_limit_is_searched_not_mapped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A map costs memory per id, so a pack larger than MAP_LIMIT is read through the searching reader."""
    repo, blobs, _ = _store(tmp_path / "s", 1000)
    monkeypatch.setattr("reelstore.backend.packs.bulk_read.MAP_LIMIT", 999)
    reader = BulkReader(repo.objects)
    got: list[bytes] = []
    ids = [b.id for b in blobs]
    reader.read_many(ids, lambda h, raw, stored: got.append(raw), lambda raw: None)
    assert reader._mapped == {} and got == [b.encode() for b in blobs]
