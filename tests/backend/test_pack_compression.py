"""How the pack writer compresses new objects: a dictionary only where the small bodies share something,
incompressible content stored after one attempt, and the same bytes read back either way."""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import pytest
import zstandard

from reelstore.backend.packs.pack import Pack
from reelstore.backend.packs.pack_item import PackItem
from reelstore.backend.packs.pack_write import write_pack
from reelstore.objects import Blob, Hash, Record, Tree


def _write(tmp_path: Path, objs: list) -> tuple[Pack, dict[str, int]]:
    result = write_pack(tmp_path / "pack", [PackItem(o.id, o.encode(), 1000) for o in objs], fsync=False)
    assert result.pack_path is not None
    return Pack(result.pack_path), result.methods


def test_small_incompressible_bodies_get_no_dictionary(tmp_path: Path) -> None:
    objs = [Blob(i.to_bytes(4, "big") + os.urandom(50 + i % 400)) for i in range(20000)]  # a counter, then noise
    pack, methods = _write(tmp_path, objs)
    try:
        assert methods["stored"] == len(objs) and not methods["dict"]
        assert pack._dict_bytes == b""
        assert all(pack.get_raw(o.id) == o.encode() for o in objs)
    finally:
        pack.close()


def test_small_bodies_that_share_words_get_one(tmp_path: Path) -> None:
    objs = [
        Record(None, Tree(0, ()).id, author="ann", message=f"change {i} of the inventory", time=i) for i in range(2000)
    ]
    pack, methods = _write(tmp_path, objs)
    try:
        assert pack._dict_bytes and methods["dict"] > len(objs) // 2
        assert all(pack.get_raw(o.id) == o.encode() for o in objs)
    finally:
        pack.close()


def test_no_dictionary_is_trained_when_the_bodies_share_too_little(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Namespace nodes of fresh ids share their names' prefixes, so side by side they compress, but
    too little to pay for a dictionary: the writer sees that before training (which would cost more
    than packing them), and packs the same bytes."""
    trained: list[int] = []
    real = zstandard.train_dictionary

    def counted(*args: Any, **kwargs: Any) -> zstandard.ZstdCompressionDict:
        trained.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(zstandard, "train_dictionary", counted)
    rng = random.Random(7)
    objs = [Tree(0, tuple((f"f/{i * 32 + k:06}", Hash(rng.randbytes(32))) for k in range(32))) for i in range(400)]
    pack, methods = _write(tmp_path, objs)
    try:
        assert not trained and pack._dict_bytes == b"" and methods["zstd"] == len(objs)
        assert all(pack.get_raw(o.id) == o.encode() for o in objs)
    finally:
        pack.close()
