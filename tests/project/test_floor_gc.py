"""bench/floor_gc.py, the floor the bench sets beside `reel gc --prune=now`: it must keep exactly what reel
keeps, leave a store fsck passes, and refuse damage as reel does, or the floor would measure less work
than reel does."""

from __future__ import annotations

import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

from reelstore.backend.packs.pack import Pack
from reelstore.backend.packs.pack_index import index_bytes
from reelstore.backend.packs.pack_item import PackItem, PackOptions
from reelstore.backend.repo import Repo
from reelstore.namespace.tree import Namespace
from reelstore.objects import Blob, Record

FLOOR = Path(__file__).resolve().parents[2] / "bench" / "floor_gc.py"
OLD = int(time.time()) - 30 * 86400


def _store(path: Path) -> Repo:
    """The bench's shape, small: random blobs in one pack, half of them named in the trunk's namespace,
    the namespace's trees in a pack of their own, the last record loose."""
    repo = Repo.init(path)
    rnd = random.Random(5)
    blobs = [Blob(rnd.randbytes(100 + i % 300)) for i in range(900)]
    repo.objects.add_pack([PackItem(b.id, b.encode(), OLD) for b in blobs], PackOptions())
    head = repo.refs["refs/heads/main"]
    top = repo.objects.get_as(head, Record)
    root = Namespace(repo.objects).update(top.namespace, {f"f/{i:04}": b.id for i, b in enumerate(blobs[::2])})
    rec = Record(parent=head, namespace=root, effects=None, view=None, author="t", message="bulk", time=0)
    repo.objects.put(rec)
    repo.refs.set("refs/heads/main", rec.id, head, message="t")
    loose = [h for h in repo.objects.loose if h != rec.id]
    repo.objects.add_pack([PackItem(h, repo.objects.get_raw(h), OLD, "t") for h in loose], PackOptions())
    for h in loose:
        Path(repo.objects.loose_path(h)).unlink()
    return repo


def test_the_floor_keeps_what_reel_keeps(reel, tmp_path: Path) -> None:
    _store(tmp_path / "r")
    shutil.copytree(tmp_path / "r", tmp_path / "f", symlinks=True)
    done = reel("gc", "--prune=now", cwd=tmp_path / "r")
    floor = subprocess.run([sys.executable, str(FLOOR)], cwd=tmp_path / "f", capture_output=True, timeout=60)
    assert floor.returncode == 0, floor.stderr
    kept = floor.stdout.decode().split()
    assert f"reachable {kept[1]}" in done.stdout.decode() and f"packed {kept[3]}" in done.stdout.decode()
    assert sorted(Repo.open(tmp_path / "f").objects) == sorted(Repo.open(tmp_path / "r").objects)
    checked = reel("fsck", cwd=tmp_path / "f")
    assert checked.returncode == 0 and checked.stderr.decode().rstrip().endswith("reachable: ok")


def test_the_floor_refuses_a_damaged_entry_as_reel_does(reel, tmp_path: Path) -> None:
    """A reachable entry whose CRC fails in a pack whose checksums hold: reel's gc and the floor both
    stop with E007 (exit status 3)."""
    repo = _store(tmp_path / "r")
    victim = Blob(random.Random(5).randbytes(100)).id
    (pack,) = [p for p in repo.objects.packs() if victim in p]
    ids, offsets, crcs, mtimes = pack.index.columns()
    rows = [(h, o, c ^ (h == victim), t) for h, o, c, t in zip(ids, offsets, crcs, mtimes)]
    pack.index.path.write_bytes(index_bytes(rows, pack.index.pack_checksum))
    assert Pack(pack.path).checksums_ok()
    shutil.copytree(tmp_path / "r", tmp_path / "f", symlinks=True)
    done = reel("gc", "--prune=now", cwd=tmp_path / "r")
    assert done.returncode == 3 and done.stderr.startswith(b"error: E007: "), done.stderr
    floor = subprocess.run([sys.executable, str(FLOOR)], cwd=tmp_path / "f", capture_output=True, timeout=60)
    assert floor.returncode == 3 and floor.stderr.startswith(b"error: E007: "), floor.stderr
