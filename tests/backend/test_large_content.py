"""Large content (issue 11, finding 6): stored as content-defined chunks, streamed in and out.

Each command runs as a real `reel` under an address-space limit, and its peak resident memory is
asserted far below the content's size. CI uses a file of SIZE bytes; bench/bench_large_file.py runs the
same steps on 2 GiB."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest
from memlimit import MiB, run_reel

from reelstore.backend import content
from reelstore.backend.object_store import MemoryObjectStore
from reelstore.backend.repo import Repo
from reelstore.errors import BadInput
from reelstore.kernel import verbs as kernel
from reelstore.objects import Blob, Chunks
from reelstore.objects.block import decode
from reelstore.objects.chunks import CHUNK_MAX, CHUNK_MIN, MAX_EXPANSION, THRESHOLD, pieces

SIZE = 80 * MiB
"""Over the 64 MiB object limit: before chunking, such a put succeeded and could never be read (E007)."""
RSS_LIMIT = 200 * MiB


def _random_file(path: Path, size: int) -> None:
    """Incompressible, non-repeating content, written a MiB at a time."""
    with open(path, "wb") as f:
        for _ in range(size // MiB):
            f.write(os.urandom(MiB))


class _Trickle(io.RawIOBase):
    """A stream that returns at most `step` bytes per read, as a pipe does."""

    def __init__(self, data: bytes, step: int) -> None:
        self.data, self.at, self.step = data, 0, step

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        n = self.step if n < 0 else min(n, self.step)
        out = self.data[self.at : self.at + n]
        self.at += len(out)
        return out


def test_chunk_list_rules() -> None:
    b = Blob(b"x").id
    with pytest.raises(BadInput, match="add up"):
        Chunks(THRESHOLD + 2, ((b, CHUNK_MAX), (b, 1)))
    with pytest.raises(BadInput, match="is a blob"):
        Chunks(2, ((b, 1), (b, 1)))
    with pytest.raises(BadInput):
        Chunks(CHUNK_MAX + 1 + CHUNK_MAX, ((b, CHUNK_MAX + 1), (b, CHUNK_MAX)))
    listing = Chunks(THRESHOLD + 1, ((b, CHUNK_MAX), (b, 1)))
    assert listing.references() == (b, b)


def test_a_chunk_list_may_not_expand_its_pieces_without_bound() -> None:
    """One 4 MiB piece listed 2^20 times would write 4 TiB from 4 MiB stored: refused when decoded.
    A file of zeros (one piece repeated 4096 times: 16 GiB) is still a chunk list."""
    b = Blob(b"x").id
    assert Chunks(MAX_EXPANSION * CHUNK_MAX, ((b, CHUNK_MAX),) * MAX_EXPANSION).size == 16 << 30
    with pytest.raises(BadInput, match="more than 4096 times its pieces") as err:
        Chunks((MAX_EXPANSION + 1) * CHUNK_MAX, ((b, CHUNK_MAX),) * (MAX_EXPANSION + 1))
    assert err.value.details["field"] == "parts"
    crafted = Chunks.__new__(Chunks)
    object.__setattr__(crafted, "size", 1 << 42)
    object.__setattr__(crafted, "parts", ((b, CHUNK_MAX),) * (1 << 20))
    with pytest.raises(BadInput):
        decode(crafted.encode())


def test_streamed_cuts_equal_whole_cuts_and_edits_move_few_boundaries() -> None:
    data = os.urandom(24 * MiB)
    whole = list(pieces(io.BytesIO(data)))
    assert b"".join(whole) == data
    assert all(CHUNK_MIN <= len(p) <= CHUNK_MAX for p in whole[:-1])
    assert list(pieces(_Trickle(data, 65536))) == whole  # type: ignore[arg-type]
    edited = data[: 12 * MiB] + b"inserted" + data[12 * MiB :]
    again = list(pieces(io.BytesIO(edited)))
    assert len(set(again) - set(whole)) <= 2, "an insertion moved more than the boundaries around it"


def test_content_round_trip_and_dedupe_across_versions() -> None:
    store = MemoryObjectStore()
    small = os.urandom(THRESHOLD)
    h_small, _ = content.write(store, io.BytesIO(small))
    assert isinstance(store.get(h_small), Blob) and content.read_all(store, h_small) == small
    data = os.urandom(20 * MiB)
    h1, size = content.write(store, io.BytesIO(data))
    listing = store.get(h1)
    assert isinstance(listing, Chunks) and size == listing.size == len(data)
    assert content.read_all(store, h1) == data and content.size(store, h1) == len(data)
    before = set(store)
    h2, _ = content.write(store, io.BytesIO(data[: 5 * MiB] + b"!" + data[5 * MiB :]))
    added = set(store) - before
    assert h2 != h1 and 2 <= len(added) <= 3, "a one-byte edit stored more than the list and its own pieces"
    assert content.write(None, io.BytesIO(data))[0] == h1


def test_a_piece_that_disagrees_with_its_list_is_e007() -> None:
    store = MemoryObjectStore()
    short = Blob(b"s" * 10)
    store.put(short)
    bad = Chunks(THRESHOLD + 1, ((short.id, CHUNK_MAX), (short.id, 1)))
    store.put(bad)
    with pytest.raises(Exception, match="holds 10 bytes"):
        content.read_all(store, bad.id)


def test_an_object_over_the_limit_is_refused_not_stored_unreadable(tmp_path: Path) -> None:
    repo = Repo.init(tmp_path)
    with pytest.raises(BadInput, match="exceeds"):
        repo.objects.put(Blob(bytes(65 * MiB)))


def test_kernel_put_of_large_bytes_is_chunked(tmp_path: Path) -> None:
    repo = Repo.init(tmp_path)
    kernel.fork(repo, "v")
    data = os.urandom(9 * MiB)
    h = kernel.put(repo, "v", "big", data)
    assert isinstance(repo.objects.get(h), Chunks)
    assert kernel.get(repo, "v", "big") == data
    assert all(len(p) <= CHUNK_MAX for p in kernel.read(repo, "v", "big"))


def test_a_large_file_round_trips_through_every_command_in_bounded_memory(tmp_path: Path) -> None:
    src, out = tmp_path / "big.bin", tmp_path / "out.bin"
    _random_file(src, SIZE)
    assert run_reel(tmp_path, "init").returncode == 0
    assert run_reel(tmp_path, "fork", "v").returncode == 0
    steps: dict[str, int] = {}
    with open(src, "rb") as f:
        res = run_reel(tmp_path, "put", "v", "big", stdin=f)
    assert res.returncode == 0, res.stderr
    steps["put"] = res.maxrss
    with open(out, "wb") as f:
        res = run_reel(tmp_path, "get", "v", "big", stdout=f)
    assert res.returncode == 0, res.stderr
    steps["get"] = res.maxrss
    assert out.stat().st_size == SIZE and out.read_bytes() == src.read_bytes()
    assert run_reel(tmp_path, "commit", "v").returncode == 0
    for step in (("fsck", "--full"), ("gc", "--prune=now"), ("log",), ("fsck", "--full")):
        res = run_reel(tmp_path, *step)
        assert res.returncode == 0, f"{step}: {res.stderr}"
        steps[" ".join(step)] = res.maxrss
    assert len(list((tmp_path / ".reel/objects/pack").glob("*.pack"))) == 1
    repo = Repo.open(tmp_path / ".reel")
    h = kernel.namespace(repo).get(repo.objects.get(repo.refs["refs/heads/main"]).namespace, "big")
    assert h is not None
    with open(out, "wb") as f:
        res = run_reel(tmp_path, "cat-file", "-p", h.hex(), stdout=f)
    assert res.returncode == 0, res.stderr
    steps["cat-file -p (packed)"] = res.maxrss
    assert out.read_bytes() == src.read_bytes()
    res = run_reel(tmp_path, "hash-object", str(src))
    assert res.returncode == 0
    steps["hash-object"] = res.maxrss
    too_big = {step: rss // MiB for step, rss in steps.items() if rss > RSS_LIMIT}
    assert not too_big, f"peak RSS in MiB over {RSS_LIMIT // MiB} for a {SIZE // MiB} MiB file: {too_big}"


def test_run_collects_a_huge_sparse_file_in_bounded_memory(tmp_path: Path) -> None:
    assert run_reel(tmp_path, "init").returncode == 0
    res = run_reel(tmp_path, "run", "--commit", "--", "truncate", "-s", "256M", "big.bin")
    assert res.returncode == 0, res.stderr
    assert "Traceback" not in res.stderr
    assert res.maxrss < RSS_LIMIT, f"reel run peaked at {res.maxrss // MiB} MiB"
    repo = Repo.open(tmp_path / ".reel")
    h = kernel.namespace(repo).get(repo.objects.get(repo.refs["refs/heads/main"]).namespace, "big.bin")
    assert h is not None and content.size(repo.objects, h) == 256 * MiB
    assert set(b"".join(content.read(repo.objects, h))[::4096]) == {0}
