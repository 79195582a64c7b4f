"""SIGKILL at every crash point of a transaction and of its group commit (the one pack of objects, then
the ref): afterwards the view holds all of the transaction or none of it, fsck is clean, and the next
writer succeeds once the killed writer's lock (if it left one) is cleared as provably stale."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from reelstore.backend.repo import Repo
from reelstore.kernel import verbs as kernel

REEL = [sys.executable, "-c", "from reelstore.cli.main import main; main()"]
POINTS = (
    "refs:prepared",
    "batch:pack-synced",
    "batch:pack-renamed",
    "batch:renamed",
    "refs:lock-written",
    "refs:logged",
    "refs:op-logged",
    "refs:renamed",
    "transaction:landed",
)
BEFORE = (
    "refs:prepared",
    "batch:pack-synced",
    "batch:pack-renamed",
    "batch:renamed",
    "refs:lock-written",
    "refs:logged",
)


def reel(cwd: Path, *args: str, crash: str | None = None) -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if k not in ("REEL_DIR", "REEL_TEST_CRASH_AT")}
    if crash:
        env["REEL_TEST_CRASH_AT"] = crash
    return subprocess.run([*REEL, *args], cwd=cwd, env=env, capture_output=True, timeout=120)


@pytest.mark.parametrize("point", POINTS)
def test_killed_tree_import_lands_whole_or_not_at_all(tmp_path: Path, point: str) -> None:
    repo = Repo.init(tmp_path)
    kernel.fork(repo, "v")
    kernel.put(repo, "v", "kept.txt", b"before")
    at = repo.refs["refs/views/v"]
    tree = tmp_path / "tree"
    for i in range(40):
        (tree / f"d{i % 4}").mkdir(parents=True, exist_ok=True)
        (tree / f"d{i % 4}" / f"f{i}").write_bytes(b"file %d" % i)

    killed = reel(tmp_path, "put", "v", "tree", crash=point)
    assert killed.returncode == -signal.SIGKILL, killed.stderr.decode()

    fresh = Repo.open(tmp_path)
    names = [n for n, _ in kernel.ls(fresh, "v")]
    if point in BEFORE:
        assert fresh.refs["refs/views/v"] == at
        assert names == ["kept.txt"]
    else:
        assert len(names) == 41 and "kept.txt" in names
        assert kernel.get(fresh, "v", "tree/d3/f39") == b"file 39"
    fsck = reel(tmp_path, "fsck")
    assert fsck.returncode == 0, fsck.stdout.decode() + fsck.stderr.decode()
    cleared = reel(tmp_path, "gc", "--clear-stale-locks")
    assert cleared.returncode == 0, cleared.stderr.decode()
    again = reel(tmp_path, "put", "v", "tree")
    assert again.returncode == 0, again.stderr.decode()
    assert len(kernel.ls(Repo.open(tmp_path), "v")) == 41


def test_a_roll_up_killed_after_writing_its_pack_leaves_a_lock_gc_takes_over(tmp_path: Path) -> None:
    from reelstore.backend.disk_store import ROLL_UP_PACKS
    from reelstore.maintenance.fsck import fsck
    from reelstore.maintenance.lock import gc_lock

    repo = Repo.init(tmp_path)
    kernel.fork(repo, "v")
    with gc_lock(repo):  # no roll-up meanwhile: the next write is the one that rolls up
        for i in range(ROLL_UP_PACKS):
            kernel.put(repo, "v", f"f{i:03d}", b"%d" % i)
    (tmp_path / "last.txt").write_bytes(b"last")
    killed = reel(tmp_path, "put", "v", "last", "last.txt", crash="roll-up:written")
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    lock = tmp_path / ".reel" / "gc.lock"
    assert lock.exists()  # the dead writer's: the merged pack is written, the merged ones not yet deleted
    collected = reel(tmp_path, "gc", "--prune=now")
    assert collected.returncode == 0, collected.stderr  # the stale lock is taken over
    assert not lock.exists()
    fresh = Repo.open(tmp_path)
    assert kernel.get(fresh, "v", "last") == b"last" and kernel.get(fresh, "v", "f007") == b"7"
    assert fsck(fresh).clean


def test_a_fork_killed_before_its_verb_log_line_leaves_a_live_view(tmp_path: Path) -> None:
    """SIGKILL once the fork's ref is in place, before its verb-log line (which has no fsync of its own,
    so a power cut may drop it the same way) while the log's newest line for the name is an older
    abort: the view is live and commits, fsck is clean, and the log then answers "committed"."""
    repo = Repo.init(tmp_path)
    kernel.fork(repo, "x")
    kernel.abort(repo, "x")
    killed = reel(tmp_path, "fork", "x", crash="refs:renamed")
    assert killed.returncode == -signal.SIGKILL, killed.stderr.decode()
    lines = (tmp_path / ".reel" / "logs" / "OPS").read_bytes().split(b"\n")
    marks = [doc for doc in map(json.loads, lines[:-1]) if "view" in doc]  # the fork's ref line comes first
    assert (marks[-1]["verb"], marks[-1]["view"]) == ("abort", "x") and lines[-1] == b""
    cleared = reel(tmp_path, "gc", "--clear-stale-locks")  # the killed writer's lock, provably stale
    assert cleared.returncode == 0, cleared.stderr.decode()
    fsck = reel(tmp_path, "fsck")
    assert fsck.returncode == 0, fsck.stdout.decode() + fsck.stderr.decode()
    fresh = Repo.open(tmp_path)
    assert fresh.refs.get("refs/views/x") is not None
    kernel.put(fresh, "x", "a", b"1")
    kernel.commit(fresh, "x")
    shown = reel(tmp_path, "fork", "x", "--from", "x")
    assert shown.returncode != 0 and b"committed" in shown.stderr, shown.stderr.decode()
