"""bench/floor_batch.py, the floor the bench sets beside `reel cat-file --batch`: it must print reel's bytes
and refuse what reel refuses, or the floor would measure less work than reel does."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from pack_objects import every_method

from reelstore.backend.packs.pack_item import PackItem, PackOptions
from reelstore.backend.repo import Repo
from reelstore.objects import Blob

FLOOR = Path(__file__).resolve().parents[2] / "bench" / "floor_batch.py"


def _store(tmp_path: Path) -> tuple[Repo, list[bytes]]:
    """One pack using every method (records for the dictionary, versions of a text for bases, a large
    blob stored plain or compressed, an empty one), and the ids to ask for, with names no pack holds."""
    repo = Repo.init(tmp_path)
    objs = [*every_method(), Blob(b"x" * 70_000)]
    result = repo.objects.add_pack(
        (PackItem(o.id, o.encode(), 1, "f" if o.kind == "blob" else "") for o in objs), PackOptions()
    )
    assert result.methods["dict"] and result.methods["base"] and result.methods["stored"]
    names = [o.id.hex().encode() for o in objs]
    return repo, [*names, Blob(b"absent").id.hex().encode(), b"HEAD", objs[0].id.hex().upper().encode(), b""]


def _run(cmd: list[str], cwd: Path, names: list[bytes]) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(cmd, cwd=cwd, input=b"\n".join(names) + b"\n", capture_output=True, timeout=60)


def test_the_floor_prints_what_reel_prints(reel, tmp_path: Path, read_path: str) -> None:
    _, names = _store(tmp_path)
    # Names that are not full lowercase ids are resolved by reel only: the floor answers them `missing`.
    ids = names[:-3]
    floor = _run([sys.executable, str(FLOOR)], tmp_path, ids)
    assert floor.returncode == 0, floor.stderr
    assert floor.stdout == reel("cat-file", "--batch", input=b"\n".join(ids) + b"\n", check=True).stdout
    assert floor.stdout.count(b" missing\n") == 1


def test_the_floor_refuses_a_damaged_entry_as_reel_does(reel, tmp_path: Path, read_path: str) -> None:
    repo, names = _store(tmp_path)
    pack = next(repo.objects.pack_dir.glob("*.pack"))
    data = bytearray(pack.read_bytes())
    data[len(data) // 2] ^= 0x10
    pack.chmod(0o644)
    pack.write_bytes(bytes(data))
    ids = names[:-4]
    floor = _run([sys.executable, str(FLOOR)], tmp_path, ids)
    ours = reel("cat-file", "--batch", input=b"\n".join(ids) + b"\n")
    assert floor.returncode == ours.returncode == 3
    assert floor.stdout == ours.stdout  # the answers before the damaged object
    assert floor.stderr.startswith(b"error: E007: ") and ours.stderr.startswith(b"error: E007: ")
