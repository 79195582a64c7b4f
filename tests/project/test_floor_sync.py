"""bench/floor_sync.py, the floors the bench sets beside `reel push` and `reel clone`: the push floor must
land exactly the pack and ref reel's push landed (also when it first loads reel's modules), and the
clone floor must store exactly the objects reel's store holds, or the floors would measure less work than
reel does."""

from __future__ import annotations

import random
import shutil
import subprocess
import sys
from pathlib import Path

from gitserver import bare, fsck, git

from reelstore import sync
from reelstore.backend.packs.pack import Pack
from reelstore.backend.repo import Repo
from reelstore.objects import Blob, Record, Tree

FLOOR = Path(__file__).resolve().parents[2] / "bench" / "floor_sync.py"
REF = "refs/reel/heads/main"


def _grow(repo: Repo, tag: str, n: int) -> None:
    """`n` blobs of random bytes (as the bench's: nothing for upload-pack to deltify, which the clone
    floor, like the bench's data, does not meet) in a new record on the trunk."""
    rnd = random.Random(tag)
    blobs = [Blob(rnd.randbytes(100 + 37 * i)) for i in range(n)]
    tree = Tree(0, tuple(sorted((f"{tag}{i:03}", b.id) for i, b in enumerate(blobs))))
    rec = Record(repo.refs["refs/heads/main"], tree.id, message=tag, time=1)
    repo.objects.put_many([*blobs, tree, rec])
    repo.refs.set("refs/heads/main", rec.id, repo.refs["refs/heads/main"])


def _pushed(tmp_path: Path, tag: str, n: int) -> tuple[Repo, Path]:
    """A store bound to a bare remote `origin`, grown by `n` blobs and pushed."""
    repo = Repo.init(tmp_path / "a")
    remote = bare(tmp_path / "r.git")
    sync.add_remote(repo, "origin", str(remote))
    _grow(repo, tag, n)
    sync.push(repo, "origin")
    return repo, remote


def _floor(*args: str) -> None:
    subprocess.run([sys.executable, str(FLOOR), *args], check=True, capture_output=True, timeout=120)


def test_the_push_floor_lands_what_reel_pushed_with_and_without_reels_modules(tmp_path: Path) -> None:
    repo, remote = _pushed(tmp_path, "first", 20)
    before = tmp_path / "before.git"
    shutil.copytree(remote, before, symlinks=True)
    old = git("--git-dir", str(remote), "rev-parse", REF).strip()
    _grow(repo, "more", 10)
    sync.push(repo, "origin")
    new = git("--git-dir", str(remote), "rev-parse", REF).strip()
    pack = tmp_path / "incr.pack"
    pack.write_bytes(
        subprocess.run(
            ["git", "--git-dir", str(remote), "pack-objects", "--revs", "--stdout", "-q"],
            input=f"{new}\n^{old}\n".encode(),
            capture_output=True,
            check=True,
            timeout=60,
        ).stdout
    )
    modules = tmp_path / "modules.txt"
    modules.write_text("reelstore.sync.push\nreelstore.porcelain.push\n")
    for k, extra in enumerate([(), (str(modules),)]):
        target = tmp_path / f"floor{k}.git"
        shutil.copytree(before, target, symlinks=True)
        _floor("push", str(target), REF, old, new, str(pack), *extra)
        assert git("--git-dir", str(target), "rev-parse", REF).strip() == new
        assert git("--git-dir", str(target), "rev-list", "--objects", "--all") == git(
            "--git-dir", str(remote), "rev-list", "--objects", "--all"
        )
        fsck(target)
    missing = tmp_path / "missing.txt"
    missing.write_text("reelstore.no_such_module\n")
    target = tmp_path / "floor-missing.git"
    shutil.copytree(before, target, symlinks=True)
    refused = subprocess.run(
        [sys.executable, str(FLOOR), "push", str(target), REF, old, new, str(pack), str(missing)],
        capture_output=True,
        timeout=120,
    )
    assert refused.returncode != 0 and b"reelstore.no_such_module" in refused.stderr
    assert git("--git-dir", str(target), "rev-parse", REF).strip() == old


def test_the_clone_floor_stores_every_object_reel_holds(tmp_path: Path) -> None:
    repo, remote = _pushed(tmp_path, "blob", 30)
    tip = git("--git-dir", str(remote), "rev-parse", REF).strip()
    _floor("clone", str(remote), tip, str(tmp_path / "c"))
    packs = list((tmp_path / "c" / "objects" / "pack").glob("*.pack"))
    assert len(packs) == 1
    stored = {bytes(h): Pack(packs[0]).get_raw(h) for h in Pack(packs[0]).index.ids()}
    assert stored == {bytes(h): repo.objects.get_raw(h) for h in repo.objects}  # every object, as reel holds it
