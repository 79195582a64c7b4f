"""The optional C accelerator of `cat-file --batch` (reelstore.backend.packs._stored_batch): the same bytes as
the pure-Python path, the same refusals of damage (it hands a damaged entry back and the pure path names
it), no read outside the mapped files, no leaked references. Every test here runs both paths."""

from __future__ import annotations

import os
import platform
import random
import shutil
import struct
import subprocess
import sys
import tracemalloc
import zlib
from pathlib import Path

import blake3
import pytest
from click.testing import CliRunner
from pack_objects import every_method

from reelstore.backend.packs.bulk_read import BulkReader, accelerator_built, accelerator_on
from reelstore.backend.packs.pack_index import FANOUT, IDX_HEADER
from reelstore.backend.packs.pack_item import PackItem, PackOptions
from reelstore.backend.repo import Repo
from reelstore.cli.main import cli
from reelstore.objects import Blob

DIRECT = 4096


def _store(path: Path) -> tuple[list[bytes], dict[bytes, int]]:
    """A pack of every method, and one of stored (random, so incompressible) blobs around the sizes where the
    accelerator's rules change: an empty one, one-byte and two-byte size varints, contents just below
    and above DIRECT, a three-byte varint (left to Python). Returns the names to ask for, with ones no
    pack holds and ones that are no full lowercase id, and each packed object's content size by name;
    one object is left loose."""
    repo = Repo.init(path)
    rng = random.Random(7)
    sizes = [0, 1, 60, 120, 125, 126, 127, 128, 300, 4000, DIRECT - 3, DIRECT - 2, DIRECT, 16_000, 16_379, 20_000]
    stored = [Blob(rng.randbytes(n)) for n in sizes]
    methods = every_method()
    result = repo.objects.add_pack(
        (PackItem(o.id, o.encode(), 1, "f" if o.kind == "blob" else "") for o in methods), PackOptions()
    )
    assert result.methods["zstd"] and result.methods["dict"]
    # A pack of their own: a dictionary trained on the random blobs would compress them.
    assert repo.objects.add_pack(PackItem(b.id, b.encode(), 1) for b in stored).methods["stored"] == len(stored)
    objs = [*methods, *stored]
    loose = Blob(b"loose, not packed")
    repo.objects.put(loose)
    names = [o.id.hex().encode() for o in objs]
    odd = [loose.id.hex().encode(), Blob(b"absent").id.hex().encode(), names[0].upper(), b"HEAD", b"", b"z" * 64]
    mixed = names[:]
    for at, name in zip(range(3, len(mixed), 40), odd):
        mixed.insert(at, name)
    return [*mixed, *odd], {o.id.hex().encode(): len(o.content()) for o in objs}


def _by_hand(reader: BulkReader, names: list[bytes], with_content: bool = True) -> tuple[bytes, list[bytes]]:
    """What the accelerator answers of `names` run as cat-file runs it, and the names it leaves."""
    records, at, out, left = b"".join(n + b"\n" for n in names), 0, bytearray(), []
    while (at := reader.answer(records, at, b"\n", out, with_content, DIRECT)) < len(records):
        end = records.index(b"\n", at)
        left.append(records[at:end])
        at = end + 1
    return bytes(out), left


def _batch(path: Path, names: list[bytes], mode: str = "--batch") -> tuple[int, bytes, str]:
    got = CliRunner().invoke(cli, ["-C", str(path), "cat-file", mode], input=b"\n".join(names) + b"\n")
    assert got.exception is None or isinstance(got.exception, SystemExit), got.exception
    return got.exit_code, got.stdout_bytes, got.stderr


def _both(
    path: Path, names: list[bytes], monkeypatch: pytest.MonkeyPatch, mode: str = "--batch"
) -> tuple[int, bytes, str]:
    """The batch's answer on the accelerated path, checked equal to the pure path's."""
    fast = _batch(path, names, mode)
    with monkeypatch.context() as env:
        env.setenv("REEL_PURE", "1")
        pure = _batch(path, names, mode)
    assert fast == pure
    return fast


def test_reel_pure_turns_the_accelerator_off(tmp_path: Path, read_path: str) -> None:
    Repo.init(tmp_path)
    reader = BulkReader.of_repo(Repo.open(tmp_path))
    assert accelerator_on() == reader.accelerated == (read_path == "accelerated")
    assert reader.answer(b"0" * 64 + b"\n", 0, b"\n", bytearray(), True, DIRECT) == 0


@pytest.mark.parametrize("mode", ["--batch", "--batch-check"])
def test_both_paths_print_the_same_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, read_path: str, mode: str
) -> None:
    names, sizes = _store(tmp_path)
    status, out, err = _both(tmp_path, names, monkeypatch, mode)
    assert status == 0 and err == ""
    lines = out.split(b"\n")
    for name, size in sizes.items():
        assert any(line.startswith(name + b" ") and line.endswith(b" %d" % size) for line in lines), name
    assert out.endswith(b"z" * 64 + b" missing\n")


@pytest.mark.usefixtures("accelerated")
def test_the_accelerator_answers_stored_entries_and_leaves_the_rest(tmp_path: Path) -> None:
    """Run by hand, as cat-file does: a run of stored entries is answered in C; a compressed entry, a
    content of DIRECT bytes or more, a three-byte size and a name no pack holds are handed back."""
    names, sizes = _store(tmp_path)
    reader = BulkReader.of_repo(Repo.open(tmp_path))
    out, left = _by_hand(reader, names)
    answered = [n for n in names if n not in left]
    assert all(n in sizes and sizes[n] < DIRECT for n in answered)
    assert {0, 1, 60, 127, 128, 300, 4000, DIRECT - 3} <= {sizes[n] for n in answered}
    assert {DIRECT, 16_000, 20_000} <= {sizes[n] for n in left if n in sizes}
    assert [n for n in names if n not in sizes] == [n for n in left if n not in sizes]
    # --batch-check has no content to write straight out: any stored size a two-byte varint holds.
    check, _ = _by_hand(reader, names, with_content=False)
    assert b" blob 16000\n" in check and b" blob 20000\n" not in check
    # What it answered is what the pure path prints for those names.
    pure = CliRunner().invoke(
        cli, ["-C", str(tmp_path), "cat-file", "--batch"], input=b"\n".join(answered) + b"\n", env={"REEL_PURE": "1"}
    )
    assert pure.exit_code == 0 and pure.stdout_bytes == out


def _damage(path: Path, what: str) -> list[bytes]:
    """A store of stored blobs with one damaged entry in the middle (its index or pack bytes changed past
    the writer's checks); returns every name, the damaged one among them."""
    repo = Repo.init(path)
    blobs = [Blob(os.urandom(200 + i)) for i in range(30)]
    repo.objects.add_pack(PackItem(b.id, b.encode(), 1) for b in blobs)
    pack = next(p for p in repo.objects.packs() if blobs[15].id in p)
    target = pack.index.find(blobs[15].id)
    off, _ = pack.index.entry(target)
    count = pack.index.count
    offsets = IDX_HEADER.size + FANOUT + 32 * count
    pack_bytes, idx_bytes = bytearray(pack.path.read_bytes()), bytearray(pack.index.path.read_bytes())
    if what == "payload":  # the CRC catches it
        pack_bytes[off + 40] ^= 0x01
    elif what == "kind":  # a blob's entry says tree: the CRC catches it
        pack_bytes[off] = 2
    elif what == "crc":  # the index's CRC of the entry is wrong
        idx_bytes[offsets + 8 * count + 4 * target] ^= 0x80
    elif what == "liar":  # the index names the entry by another entry's id... as a CRC-right entry
        other = pack.index.find(blobs[16].id)
        o_off, o_crc = pack.index.entry(other)
        struct.pack_into(">Q", idx_bytes, offsets + 8 * target, o_off)
        struct.pack_into(">I", idx_bytes, offsets + 8 * count + 4 * target, o_crc)
    elif what == "far":  # an offset past the end of the pack
        struct.pack_into(">Q", idx_bytes, offsets + 8 * target, 1 << 62)
    elif what == "tail":  # an offset whose entry would run past the entries
        struct.pack_into(">Q", idx_bytes, offsets + 8 * target, len(pack_bytes) - 32 - 5)
    for file, data in ((pack.path, pack_bytes), (pack.index.path, idx_bytes)):
        file.chmod(0o644)
        file.write_bytes(bytes(data))
    return [b.id.hex().encode() for b in blobs]


@pytest.mark.parametrize("what", ["payload", "kind", "crc", "liar", "far", "tail"])
def test_both_paths_refuse_a_damaged_entry_alike(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, read_path: str, what: str
) -> None:
    names = _damage(tmp_path, what)
    status, out, err = _both(tmp_path, names, monkeypatch)
    assert status == 3 and err.startswith("error: E007: ") and names[15].decode() in err
    assert out.count(b" blob ") == 15  # the answers before the damaged one are printed, none after
    want = {
        "payload": "checksum",
        "kind": "checksum",
        "crc": "checksum",
        "liar": "does not hash",
        "far": "outside",
        "tail": "",
    }[what]  # the bytes a "tail" offset parses are whatever is there
    assert want in err


def test_sampled_byte_flips_of_a_pack_and_its_index_read_alike(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, read_path: str
) -> None:
    """Flips across both files (header, entries, trailer; fan-out, ids, offsets, CRCs): each run is
    refused or answered, and the accelerated path gives exactly the pure path's exit, bytes and error."""
    template = tmp_path / "template"
    names = _damage(template, "none")
    pack_dir = template / ".reel" / "objects" / "pack"
    files = sorted(pack_dir.iterdir())
    rng = random.Random(3)
    outcomes = set()
    for _ in range(60):
        file = rng.choice(files)
        size = file.stat().st_size
        at, bit = rng.randrange(size), 1 << rng.randrange(8)
        store = tmp_path / "flip"
        shutil.rmtree(store, ignore_errors=True)
        shutil.copytree(template, store)
        target = store / ".reel" / "objects" / "pack" / file.name
        data = bytearray(target.read_bytes())
        data[at] ^= bit
        target.chmod(0o644)
        target.write_bytes(bytes(data))
        status, _, err = _both(store, names, monkeypatch)
        assert status in (0, 3), (file.name, at, err)
        outcomes.add(status)
    assert outcomes == {0, 3}


@pytest.mark.usefixtures("accelerated")
def test_repeated_batches_leak_neither_references_nor_memory(tmp_path: Path) -> None:
    names, _ = _store(tmp_path)
    reader = BulkReader.of_repo(Repo.open(tmp_path))
    records = b"".join(n + b"\n" for n in names)

    def round_trip() -> int:
        """One batch of every name, as cat-file runs it; how many names the accelerator left."""
        at, out, left = 0, bytearray(), 0
        while (at := reader.answer(records, at, b"\n", out, True, DIRECT)) < len(records):
            at = records.index(b"\n", at) + 1
            left += 1
        return left

    assert round_trip() <= len(names) - 12
    assert reader._spans is not None
    watched = (records, *reader._spans, *(x for span in reader._spans for x in span[:2]))
    held = [sys.getrefcount(x) for x in watched]
    tracemalloc.start()
    try:
        round_trip()
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(200):
            round_trip()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 64 << 10, f"{grown} bytes still held after 200 rounds"
    assert [sys.getrefcount(x) for x in watched] == held


@pytest.mark.usefixtures("accelerated")
def test_the_accelerators_crc32_is_zlibs() -> None:
    """Its own CRC-32, both ways it computes one (folded by carry-less multiplication where the CPU has
    it, and from tables, eight bytes a step then one at a time): every length up to 300 bytes, both sides
    of each step, and long inputs, against zlib's."""
    assert accelerator_built()
    from reelstore.backend.packs import _stored_batch

    rng = random.Random(11)
    for n in [*range(300), 1023, 1024, 4097, 16_389, 1 << 20]:
        data = rng.randbytes(n)
        assert _stored_batch.crc32(data) == _stored_batch.crc32(data, True) == zlib.crc32(data), n


LENGTHS = [
    0,
    1,
    2,
    63,
    64,
    65,
    127,
    128,
    129,
    1023,
    1024,
    1025,
    2047,
    2048,
    2049,
    3072,
    3073,
    4095,
    4096,
    4097,
    5120,
    8191,
    8192,
    8193,
    16_383,
    16_384,
    16_385,
    31_744,
    65_536,
    65_537,
    100_000,
    1 << 20,
    (1 << 20) + 1,
]
"""Around the block (64 bytes) and chunk (1 KiB) boundaries, and trees of every shape up to a MiB."""


@pytest.mark.usefixtures("accelerated")
def test_the_accelerators_blake3_is_the_packages() -> None:
    """Its own BLAKE3 (written from the specification): every length around the block and chunk
    boundaries, alone and hashed side by side with others of mixed lengths, as the batch hashes them."""
    from reelstore.backend.packs import _stored_batch

    rng = random.Random(13)
    inputs = [rng.randbytes(n) for n in LENGTHS]
    assert _stored_batch.blake3(inputs) == [blake3.blake3(x).digest() for x in inputs]
    assert [_stored_batch.blake3([x])[0] for x in inputs] == [blake3.blake3(x).digest() for x in inputs]
    for _ in range(200):
        mixed = [
            rng.randbytes(rng.choice([0, 1, 63, 64, 65, 300, 1023, 1024, 1025, rng.randrange(3000)]))
            for _ in range(rng.randrange(65))
        ]
        assert _stored_batch.blake3(mixed) == [blake3.blake3(x).digest() for x in mixed]


BASELINE_BUILD = """
import sys
from setuptools import Distribution, Extension
ext = Extension("_stored_batch", ["reelstore/backend/packs/_stored_batch.c"], define_macros=[("B3_BASELINE_ONLY", "1")])
build = Distribution({"ext_modules": [ext]}).get_command_obj("build_ext")
build.build_lib, build.build_temp = sys.argv[1], sys.argv[2]
build.ensure_finalized()
build.run()
print(build.get_ext_fullpath("_stored_batch"))
"""

BASELINE_CHECK = """
import importlib.util, random, sys, zlib
import blake3
spec = importlib.util.spec_from_file_location("_stored_batch", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
rng = random.Random(17)
inputs = [rng.randbytes(int(n)) for n in sys.argv[2].split(",")]
assert module.blake3(inputs) == [blake3.blake3(x).digest() for x in inputs]
assert [module.blake3([x])[0] for x in inputs] == [blake3.blake3(x).digest() for x in inputs]
assert all(module.crc32(x) == module.crc32(x, True) == zlib.crc32(x) for x in inputs)
print("same", len(inputs))
"""


def _ymm(shared_object: str) -> bool:
    """Whether the library's code uses a 256-bit (AVX) register anywhere."""
    code = subprocess.run(["objdump", "-d", "--no-show-raw-insn", shared_object], capture_output=True, check=True)
    return b"%ymm" in code.stdout


@pytest.mark.skipif(platform.machine() != "x86_64", reason="only x86-64 builds a second (AVX2) BLAKE3")
@pytest.mark.usefixtures("accelerated")
def test_the_baseline_build_for_cpus_without_avx2_hashes_alike(tmp_path: Path) -> None:
    """On x86-64 the loader runs the AVX2 build of the BLAKE3 compression wherever the CPU has it, so the
    other tests never reach the baseline (SSE2) build that a CPU without AVX2 runs. This builds the
    extension with the baseline alone, checks that it holds no AVX instruction while the installed one
    does, and runs its BLAKE3 and CRC-32 against the blake3 package's and zlib's."""
    from reelstore.backend.packs import _stored_batch

    root = Path(__file__).resolve().parents[2]
    built = subprocess.run(
        [sys.executable, "-c", BASELINE_BUILD, str(tmp_path / "lib"), str(tmp_path / "tmp")],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    )
    baseline = built.stdout.strip().splitlines()[-1]
    assert _ymm(str(_stored_batch.__file__)) and not _ymm(baseline)
    lengths = ",".join(str(n) for n in LENGTHS)
    checked = subprocess.run([sys.executable, "-c", BASELINE_CHECK, baseline, lengths], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout.split() == ["same", str(len(LENGTHS))]
