"""The operation log as the refs' durability point: a ref write its line holds but its file lost (what a
power cut may take, since ref files get no fsync of their own) is redone when the store opens."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from reelstore.backend.refdb import refs as refs_module
from reelstore.backend.refdb.ref_format import format_loose
from reelstore.backend.repo import Repo
from reelstore.kernel import verbs as kernel

REEL = [sys.executable, "-c", "from reelstore.cli.main import main; main()"]


def _committed(tmp_path: Path) -> tuple[Repo, Path]:
    repo = Repo.init(tmp_path)
    kernel.fork(repo, "v")
    kernel.put(repo, "v", "a.txt", b"1")
    return repo, tmp_path / ".reel"


def test_a_lost_trunk_write_and_its_reflog_line_come_back_at_open(tmp_path: Path) -> None:
    repo, dot = _committed(tmp_path)
    head = repo.refs["refs/heads/main"]
    reflog = dot / "logs" / "refs" / "heads" / "main"
    before = reflog.read_bytes()
    record = kernel.commit(repo, "v").record
    assert record is not None
    (dot / "refs" / "heads" / "main").write_bytes(format_loose("refs/heads/main", head))  # the rename lost
    reflog.write_bytes(before)  # and the reflog line
    fresh = Repo.open(tmp_path)
    assert fresh.refs["refs/heads/main"] == record
    assert fresh.refs.reflog("refs/heads/main")[-1].new == record
    assert len(fresh.refs.reflog("refs/heads/main")) == len(repo.refs.reflog("refs/heads/main"))


def test_a_lost_view_deletion_is_redone_at_open(tmp_path: Path) -> None:
    repo, dot = _committed(tmp_path)
    view = repo.refs["refs/views/v"]
    kernel.commit(repo, "v")
    (dot / "refs" / "views" / "v").write_bytes(format_loose("refs/views/v", view))  # the unlink lost
    assert Repo.open(tmp_path).refs.get("refs/views/v") is None


def test_a_ref_locked_by_a_live_writer_is_left_to_it(tmp_path: Path) -> None:
    repo, dot = _committed(tmp_path)
    head = repo.refs["refs/heads/main"]
    kernel.commit(repo, "v")
    (dot / "refs" / "heads" / "main").write_bytes(format_loose("refs/heads/main", head))
    lock = dot / "refs" / "heads" / "main.lock"
    refs_module.new_lock(lock)  # this very process: alive, between its line and its rename
    assert Repo.open(tmp_path).refs["refs/heads/main"] == head
    lock.unlink()
    assert Repo.open(tmp_path).refs["refs/heads/main"] != head


def test_the_checkpoint_bounds_what_an_open_reads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past CHECKPOINT_BYTES of log, a writer fsyncs the refs the lines name and moves the checkpoint to the
    log's end: a line before it is no longer read at open (its ref is durable)."""
    monkeypatch.setattr(refs_module, "CHECKPOINT_BYTES", 1)
    repo, dot = _committed(tmp_path)
    synced = int((dot / "logs" / "OPS.synced").read_bytes())
    assert synced == (dot / "logs" / "OPS").stat().st_size > 0
    view = repo.refs["refs/views/v"]
    kernel.put(repo, "v", "b.txt", b"2")
    assert int((dot / "logs" / "OPS.synced").read_bytes()) > synced
    (dot / "refs" / "views" / "v").write_bytes(format_loose("refs/views/v", view))
    assert Repo.open(tmp_path).refs["refs/views/v"] == view  # behind the checkpoint: not the log's to redo


def test_a_writer_breaking_a_dead_lock_redoes_its_holders_move_first(tmp_path: Path) -> None:
    """SIGKILL between a commit's line and its renames; the next commit (no open in between that could
    redo it) breaks the dead writer's trunk lock: it redoes that move first, then builds on it."""
    repo = Repo.init(tmp_path)
    for name in ("a", "b"):
        kernel.fork(repo, name)
        kernel.put(repo, name, f"{name}.txt", name.encode())
    env = {k: v for k, v in os.environ.items() if k not in ("REEL_DIR", "REEL_TEST_CRASH_AT")}
    killed = subprocess.run(
        [*REEL, "commit", "a"],
        cwd=tmp_path,
        capture_output=True,
        timeout=120,
        env={**env, "REEL_TEST_CRASH_AT": "refs:op-logged"},
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr.decode()
    assert (tmp_path / ".reel" / "refs" / "heads" / "main.lock").exists()
    kernel.commit(repo, "b")  # this handle opened before the kill: only the lock breaking can redo a's move
    names = {n for n, _ in kernel.namespace(repo).items(repo.objects.get(repo.refs["refs/heads/main"]).namespace)}
    assert names == {"a.txt", "b.txt"}
    assert repo.refs.get("refs/views/a") is None or Repo.open(tmp_path).refs.get("refs/views/a") is None


def test_the_checkpoint_stops_at_a_line_whose_rename_is_still_to_come(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer between its line and its rename (its ref locked, not yet holding the line's new value):
    a checkpoint made meanwhile by another writer stops at that line, so a power cut that took the
    rename still leaves it for the next open to redo."""
    monkeypatch.setattr(refs_module, "CHECKPOINT_BYTES", 1)
    repo, dot = _committed(tmp_path)
    kernel.fork(repo, "w")
    view = repo.refs["refs/views/v"]
    other = repo.refs["refs/views/w"]
    lock = dot / "refs" / "views" / "v.lock"
    refs_module.new_lock(lock)  # this live process holds v: it wrote its line, its rename is to come
    ops = dot / "logs" / "OPS"
    at = ops.stat().st_size
    line = json.dumps(
        {
            "op": "f" * 12,
            "time": 1,
            "verb": "put",
            "principal": "t",
            "message": "put x",
            "refs": [["refs/views/v", view.hex(), other.hex()]],
        }
    )
    with open(ops, "a") as f:
        f.write(line + "\n")
    kernel.put(repo, "w", "b.txt", b"2")  # another writer's transaction: its unlock checkpoints
    assert int((dot / "logs" / "OPS.synced").read_bytes()) == at
    lock.unlink()
    assert Repo.open(tmp_path).refs["refs/views/v"] == other  # redone from the line past the checkpoint
