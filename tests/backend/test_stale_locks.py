"""Stale ref locks: a killed writer's lock is reported by name and age in one E002 with its remedy,
writing nothing; fsck lists it; `reel gc --clear-stale-locks` removes it only if its holder is provably
dead (or, with --force, if it is older than the lock timeout). A live holder's lock is never touched."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from reelstore.backend.refdb.refs import LOCK_TIMEOUT
from reelstore.backend.repo import Repo
from reelstore.errors import Conflict, LockHeld, StaleLock
from reelstore.kernel import verbs as kernel

REEL = [sys.executable, "-c", "from reelstore.cli.main import main; main()"]


def reel(cwd: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([*REEL, *args], cwd=cwd, capture_output=True, timeout=60, input=b"data")


def store_files(root: Path) -> set[str]:
    """Every file under objects/, so a test can tell that nothing was written."""
    return {str(p.relative_to(root)) for p in (root / ".reel" / "objects").rglob("*") if p.is_file()}


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


@pytest.fixture
def live_pid() -> Iterator[int]:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()


def lock(tmp_path: Path, pid: int, host: str, since: float) -> Path:
    path = tmp_path / ".reel" / "refs" / "views" / "v.lock"
    path.write_text(f"pid {pid} host {host} time {int(since)}\n")
    return path


@pytest.fixture
def store(tmp_path: Path) -> Path:
    repo = Repo.init(tmp_path)
    kernel.fork(repo, "v")
    return tmp_path


def test_dead_holder_one_clear_e002_nothing_written_fsck_lists_gc_clears(store: Path) -> None:
    path = lock(store, dead_pid(), socket.gethostname(), time.time() - 5)
    before = store_files(store)
    failed = reel(store, "put", "v", "x.txt")
    assert failed.returncode == 5
    err = failed.stderr.decode()
    assert err.count("error: E002") == 1 and "stale" in err and "v.lock" in err and "no longer running" in err
    assert "reel gc --clear-stale-locks" in err and "kept moving" not in err
    assert store_files(store) == before, "a refused put wrote objects"
    fsck = reel(store, "fsck")
    assert fsck.returncode == 0 and b"stale lock v.lock" in fsck.stdout
    cleared = reel(store, "gc", "--clear-stale-locks")
    assert cleared.returncode == 0 and b"removed stale lock v.lock" in cleared.stdout
    assert not path.exists()
    assert reel(store, "put", "v", "x.txt").returncode == 0
    assert b"stale" not in reel(store, "fsck").stdout


def test_live_holder_is_reported_as_busy_and_never_removed(store: Path, live_pid: int) -> None:
    path = lock(store, live_pid, socket.gethostname(), time.time())
    failed = reel(store, "put", "v", "x.txt")
    assert failed.returncode == 5
    err = failed.stderr.decode()
    assert f"held by pid {live_pid}" in err and "stale" not in err
    assert b"stale" not in reel(store, "fsck").stdout
    assert reel(store, "gc", "--clear-stale-locks").returncode == 0
    assert path.exists()
    assert reel(store, "gc").returncode == 0
    assert path.exists()


def test_lock_of_another_host_is_stale_only_after_the_timeout_and_removed_only_with_force(store: Path) -> None:
    path = lock(store, 4242, "another-host.invalid", time.time())
    young = reel(store, "put", "v", "x.txt")
    assert young.returncode == 5 and b"another-host.invalid" in young.stderr and b"stale" not in young.stderr
    lock(store, 4242, "another-host.invalid", time.time() - LOCK_TIMEOUT - 60)
    old = reel(store, "put", "v", "x.txt")
    assert old.returncode == 5 and b"stale" in old.stderr and b"--force" in old.stderr
    assert b"stale lock v.lock" in reel(store, "fsck").stdout
    assert reel(store, "gc", "--clear-stale-locks").returncode == 0
    assert path.exists(), "a lock whose holder may be alive on another host was removed without --force"
    assert reel(store, "gc", "--clear-stale-locks", "--force").returncode == 0
    assert not path.exists()
    assert reel(store, "put", "v", "x.txt").returncode == 0


def test_a_taken_lock_is_its_own_kind_of_e002(store: Path, live_pid: int) -> None:
    """Callers tell a taken lock, and a stale one, by class: both stay E002 (exit 5) with the same details."""
    repo = Repo.open(store)
    path = lock(store, live_pid, socket.gethostname(), time.time())
    with pytest.raises(LockHeld) as held:
        kernel.put(repo, "v", "x.txt", b"x")
    assert not isinstance(held.value, StaleLock) and isinstance(held.value, Conflict)
    assert (held.value.code, held.value.exit_status, held.value.lock) == ("E002", 5, str(path))
    assert held.value.to_json()["details"] == {"ref": "refs/views/v", "lock": str(path)}
    lock(store, dead_pid(), socket.gethostname(), time.time() - 5)
    with pytest.raises(StaleLock) as stale:
        kernel.put(repo, "v", "x.txt", b"x")
    assert stale.value.code == "E002" and stale.value.to_json()["details"]["stale"] is True
