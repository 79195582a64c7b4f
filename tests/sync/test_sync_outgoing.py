"""The pack a push sends (`sync.outgoing`): git itself must accept every entry it writes."""

from __future__ import annotations

import hashlib
import os
import struct
import subprocess
import zlib
from pathlib import Path

import pytest
from gitserver import GIT_ENV, bare, git

from reelstore.objects import Blob
from reelstore.sync import outgoing
from reelstore.sync.outgoing import OutgoingPack, compressible, squeeze, stored


def pack_bytes(out: OutgoingPack, gather: int = 0) -> bytes:
    """A whole git pack of `out`'s entries, as dulwich's send-pack writes them: header, each record's
    bytes (one entry each, or entries gathered into pieces), SHA-1 trailer."""
    records = list(out.records(gather))
    assert len(records) == len(out)
    pieces = [b"".join(r.comp_chunks) for r in records if r.comp_chunks]
    if gather:
        assert all(len(p) >= gather for p in pieces[:-1]) and len(pieces) < len(records)
    body = b"PACK" + struct.pack(">II", 2, len(out)) + b"".join(pieces)
    return body + hashlib.sha1(body).digest()


def written_pack(out: OutgoingPack) -> bytes:
    """The whole pack as our own send-pack writes it (`write_to`); every entry is counted once."""
    pieces: list[bytes] = []
    counted: list[int] = []
    out.write_to(pieces.append, counted.append)
    assert sum(counted) == len(out) and all(n > 0 for n in counted)
    assert max(len(p) for p in pieces) <= outgoing._READ
    return b"".join(pieces)


@pytest.mark.parametrize("size", [0, 1, 63, 64, 300, 0xFFFF, 0x10000, 200_000])
def test_stored_and_squeezed_streams_inflate_to_the_data(size: int) -> None:
    for data in (os.urandom(size), b"reel " * (size // 5)):
        for stream in (stored(data), squeeze(data)):
            z = zlib.decompressobj()
            assert z.decompress(stream) == data and z.eof and not z.unused_data


def test_only_compressible_content_is_compressed() -> None:
    text, noise = b"the same words again " * 500, os.urandom(10_000)
    assert compressible(text) and not compressible(noise)
    sizes = []
    for data in (text, noise):
        out = OutgoingPack()
        out.add_object(Blob(data).id, data)
        sizes.append(len(written_pack(out)))
    assert sizes[0] < len(text) // 10
    assert sizes[1] > len(noise)  # stored: the data and its block heads


@pytest.mark.parametrize("writer", ["records", "gathered", "write_to"])
@pytest.mark.parametrize("spill", [False, True])
def test_git_indexes_the_pack_and_reads_every_object_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spill: bool, writer: str
) -> None:
    if spill:  # entries move to the spool file every few kilobytes, and one is larger than a read
        monkeypatch.setattr(outgoing, "_SPOOL", 4096)
        monkeypatch.setattr(outgoing, "_READ", 1000)
    blobs = [Blob(os.urandom(n)) for n in (0, 10, 5000, 70_000)] + [Blob(b"text %d " % i * 40) for i in range(50)]
    out = OutgoingPack()
    for b in blobs:
        out.add_object(b.id, b.encode())
    said_stored = [Blob(b"text the store kept stored %d " % n * (n // 20)) for n in (100, 90_000)]
    for b in said_stored:  # what the store's pack holds stored goes out stored, unprobed, in one block or more
        out.add_object(b.id, b.encode(), incompressible=True)
    blobs += said_stored
    commit = out.finish({"refs/heads/main": blobs[0].id}, [])
    repo = bare(tmp_path / "r.git")
    pack = tmp_path / "r.git" / "objects" / "pack" / "incoming.pack"
    data = {
        "records": lambda: pack_bytes(out),
        "gathered": lambda: pack_bytes(out, 4096),
        "write_to": lambda: written_pack(out),
    }[writer]()
    assert data == pack_bytes(out)
    pack.write_bytes(data)
    git("--git-dir", str(repo), "index-pack", "--strict", str(pack))
    git("--git-dir", str(repo), "update-ref", "refs/reel/heads/main", commit)
    git("--git-dir", str(repo), "fsck", "--strict", "--no-dangling")
    for b in blobs:
        hexid = b.id.hex()
        assert _blob(repo, f"{commit}:objects/{hexid[:2]}/{hexid[2:]}") == b.encode()
    assert git("--git-dir", str(repo), "cat-file", "-p", f"{commit}:refs") == f"{blobs[0].id.hex()} refs/heads/main\n"


def _blob(repo: Path, name: str) -> bytes:
    return subprocess.run(
        ["git", "--git-dir", str(repo), "cat-file", "blob", name],
        capture_output=True,
        check=True,
        env=GIT_ENV,
        timeout=60,
    ).stdout
