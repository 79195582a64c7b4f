"""`sync.pack_budget.check_sizes`: every entry's declared size, a delta's result size and what each entry
really inflates to are checked before anything inflates a received pack whole."""

from __future__ import annotations

import hashlib
import io
import os
import struct
import zlib

import pytest

from reelstore.errors import StorageError
from reelstore.sync.outgoing import entry_header
from reelstore.sync.pack_budget import check_sizes

BLOB, OFS_DELTA = 3, 6


def pack(*entries: bytes) -> bytes:
    body = b"PACK" + struct.pack(">II", 2, len(entries)) + b"".join(entries)
    return body + hashlib.sha1(body).digest()


def blob(data: bytes, declared: int | None = None, level: int = 6) -> bytes:
    return entry_header(BLOB, len(data) if declared is None else declared) + zlib.compress(data, level)


def leb128(n: int) -> bytes:
    out = bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def ofs_delta(base_size: int, result_size: int) -> bytes:
    delta = leb128(base_size) + leb128(result_size) + b"\x01x"  # one literal byte: enough to be read
    return entry_header(OFS_DELTA, len(delta)) + b"\x01" + zlib.compress(delta)


def check(data: bytes, limit: int = 1 << 20) -> None:
    check_sizes(io.BytesIO(data), len(data), limit)


def test_a_pack_of_many_sizes_passes() -> None:
    # small entries end inside the first piece given to zlib; large and incompressible ones run past
    # the 64 KiB read buffer, so entries begin and end anywhere in it
    datas = [os.urandom(n) for n in (0, 1, 300, 70_000, 200_000)] + [b"words " * 20_000]
    entries = [blob(d, level=lvl) for d in datas for lvl in (0, 6)]
    data = pack(*entries)
    kept: list[tuple[int, bytes]] = []
    assert check_sizes(io.BytesIO(data), len(data), 1 << 20, lambda kind, raw: kept.append((kind, raw))) is False
    assert kept == [(BLOB, d) for d in datas for _ in (0, 6)]
    with_deltas = pack(*entries, ofs_delta(300, 500))
    assert check_sizes(io.BytesIO(with_deltas), len(with_deltas), 1 << 20) is True
    trailer = data[:-1] + bytes([data[-1] ^ 1])
    check(trailer)  # sizes alone do not look at the checksum ...
    with pytest.raises(StorageError, match="checksum"):  # ... reading the pack for good does
        check_sizes(io.BytesIO(trailer), len(trailer), 1 << 20, lambda kind, raw: None)


@pytest.mark.parametrize(
    "case",
    [
        "declared over the limit",
        "inflates past declared",
        "inflates short",
        "delta result over the limit",
        "truncated",
        "not a pack",
    ],
)
def test_crafted_entries_are_refused(case: str) -> None:
    good = blob(b"fine")
    bad = {
        "declared over the limit": blob(b"x", declared=2 << 20),
        "inflates past declared": blob(b"y" * 5000, declared=100),
        "inflates short": blob(b"z" * 100, declared=5000),
        "delta result over the limit": ofs_delta(10, 3 << 20),
    }.get(case, good)
    data = pack(good, bad, good)
    if case == "truncated":
        data = data[: len(data) // 2]
    elif case == "not a pack":
        data = b"KCAP" + data[4:]
    with pytest.raises(StorageError):
        check(data)
