"""`BulkReader.read_raw` (what a push reads its objects with): the verified canonical bytes of each
object, straight from the packs once they are mapped, through `get_raw` for anything else, and whether
the pack holds it stored (so the push need not probe it again)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from reelstore.backend.packs.bulk_read import BulkReader
from reelstore.backend.repo import Repo
from reelstore.errors import StorageError
from reelstore.objects import Blob, Hash


def test_read_raw_reads_packed_objects_from_their_pack_and_the_rest_through_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = Repo.init(tmp_path / "s")
    noise = [Blob(os.urandom(200)) for _ in range(1500)]
    text = [Blob(b"the same words again and again %d " % i * 20) for i in range(1500)]
    packed = noise + text
    repo.objects.put_many(packed)  # one pack
    loose = Blob(b"loose one")
    repo.objects.put(loose)
    assert repo.objects.packs()
    reader = BulkReader(repo.objects)
    through_store: list[Hash] = []
    get_raw = repo.objects.get_raw
    monkeypatch.setattr(repo.objects, "get_raw", lambda h: through_store.append(h) or get_raw(h))
    # The pack gets mapped on the way; what its writer stored as incompressible is said so.
    assert all(reader.read_raw(b.id) == (b.encode(), True) for b in noise)
    assert all(reader.read_raw(b.id) == (b.encode(), False) for b in text)
    assert through_store == []
    assert reader.read_raw(loose.id) == (loose.encode(), False) and through_store == [loose.id]
    assert reader.read_raw(Hash(b"\x01" * 32)) is None


def test_read_raw_refuses_a_damaged_entry(tmp_path: Path) -> None:
    repo = Repo.init(tmp_path / "s")
    blobs = [Blob(b"object number %d " % i * 20) for i in range(1500)]
    repo.objects.put_many(blobs)
    pack = repo.objects.packs()[0]
    offset, _ = pack.index.entry(pack.index.find(blobs[7].id))
    with open(pack.path, "r+b") as f:
        f.seek(offset + 8)
        byte = f.read(1)
        f.seek(offset + 8)
        f.write(bytes([byte[0] ^ 0xFF]))
    fresh = Repo.open(tmp_path / "s")
    with pytest.raises(StorageError, match="damaged"):
        BulkReader(fresh.objects).read_raw(blobs[7].id)
