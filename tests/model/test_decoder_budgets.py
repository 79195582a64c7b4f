"""Decoders fed by untrusted bytes stay within bounded memory (issue 11, finding 7).

A crafted pack of 33 KB whose entries inflate to 64 MiB each (1 GiB in all) once made
`unpack-objects -n` hold every inflated entry at once; now entries are read one at a time, each
within its declared size, and the pack itself is read through a map, never slurped."""

from __future__ import annotations

import struct
from pathlib import Path

import blake3
import pytest
import zstandard
from memlimit import MiB, run_reel

from reelstore.backend.packs.pack import _FLAGS, _FORMAT, KIND_CODES, PACK_HEADER, PACK_MAGIC, VERSION, ZSTD, _varint
from reelstore.codec import MAX_OBJECT_SIZE

ENTRIES = 6
RSS_LIMIT = 300 * MiB


def _bomb_entry(tag: int) -> bytes:
    """One blob entry whose body is a 64 MiB msgpack bin, compressed to a couple of KB."""
    data_len = MAX_OBJECT_SIZE - 5
    params = zstandard.ZstdCompressionParameters.from_level(3, **_FLAGS)
    comp = zstandard.ZstdCompressor(compression_params=params).compressobj()
    out = [comp.compress(b"\xc6" + data_len.to_bytes(4, "big") + bytes([tag]))]
    zeros = bytes(MiB)
    left = data_len - 1
    while left:
        n = min(left, len(zeros))
        out.append(comp.compress(zeros[:n]))
        left -= n
    out.append(comp.flush())
    frame = b"".join(out)
    head = bytes((KIND_CODES["blob"], ZSTD)) + _varint(MAX_OBJECT_SIZE) + _varint(len(frame))
    return head + frame


def _bomb_pack(path: Path, entries: int) -> int:
    one = [_bomb_entry(i) for i in range(entries)]
    body = PACK_HEADER.pack(PACK_MAGIC, VERSION, entries, 0) + b"".join(one)
    path.write_bytes(body + blake3.blake3(body).digest())
    return path.stat().st_size


@pytest.fixture(scope="module")
def bomb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("bomb") / "bomb.pack"
    size = _bomb_pack(path, ENTRIES)
    assert size < 64 * 1024, f"the crafted pack is {size} bytes"
    assert _FORMAT == zstandard.FORMAT_ZSTD1_MAGICLESS and struct.calcsize(">I") == 4
    return path


@pytest.mark.parametrize("args", [("unpack-objects", "-n"), ("index-pack", "--stdin")])
def test_a_crafted_pack_inflating_to_a_gib_stays_bounded(tmp_path: Path, bomb: Path, args: tuple[str, ...]) -> None:
    assert run_reel(tmp_path, "init").returncode == 0
    with open(bomb, "rb") as f:
        res = run_reel(tmp_path, *args, stdin=f, limit=1536 * MiB)
    assert "Traceback" not in res.stderr and "MemoryError" not in res.stderr
    assert res.returncode == 0, res.stderr
    assert res.maxrss < RSS_LIMIT, f"{args} peaked at {res.maxrss // MiB} MiB for {ENTRIES * 64} MiB inflated"
    if args == ("index-pack", "--stdin"):
        assert len(list((tmp_path / ".reel/objects/pack").glob("*.idx"))) == 1
        check = run_reel(tmp_path, "verify-pack", *map(str, (tmp_path / ".reel/objects/pack").glob("*.pack")))
        assert check.returncode == 0, check.stderr
        assert check.maxrss < RSS_LIMIT


def test_an_entry_declaring_more_than_the_object_limit_is_refused_before_inflating(tmp_path: Path) -> None:
    entry = bytes((KIND_CODES["blob"], ZSTD)) + _varint(MAX_OBJECT_SIZE + 1) + _varint(1) + b"\x00"
    body = PACK_HEADER.pack(PACK_MAGIC, VERSION, 1, 0) + entry
    pack = tmp_path / "big.pack"
    pack.write_bytes(body + blake3.blake3(body).digest())
    assert run_reel(tmp_path, "init").returncode == 0
    with open(pack, "rb") as f:
        res = run_reel(tmp_path, "unpack-objects", "-n", stdin=f)
    assert res.returncode == 3 and "exceeds the object limit" in res.stderr, res.stderr
