"""Crash-safety and concurrency of commit, with real `reel` processes killed by SIGKILL.

`REEL_TEST_CRASH_AT=<point>` makes the process kill itself at that named step of commit. Whatever
the step, after a retry of `reel commit` and a `reel recover` the view is committed exactly once:
one record names it, its fs effect was sent once, and it is terminal.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from reelstore.backend.repo import Repo
from reelstore.drain import journal as drainlog
from reelstore.drain.drainer import record_ops
from reelstore.kernel import inspection
from reelstore.kernel import verbs as kernel
from reelstore.objects import Record

REEL = [sys.executable, "-c", "from reelstore.cli.main import main; main()"]
BEFORE_COMMIT_POINT = ("commit:checked", "commit:record-written")
AFTER_COMMIT_POINT = ("refs:op-logged", "commit:advanced", "commit:logged", "commit:retired", "commit:drained")


def reel(cwd: Path, *args: str, crash: str | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop("REEL_DIR", None)
    env.pop("REEL_TEST_CRASH_AT", None)
    if crash:
        env["REEL_TEST_CRASH_AT"] = crash
    return subprocess.run([*REEL, *args], cwd=cwd, env=env, capture_output=True, timeout=120)


def records_naming(repo: Repo, view_id: bytes) -> list[bytes]:
    """Records that committed any object of the view (they share its fork id)."""
    fork = repo.objects.get(view_id).meta["fork"]
    out = []
    h = repo.refs["refs/heads/main"]
    while h is not None:
        rec = repo.objects.get(h)
        assert isinstance(rec, Record)
        if rec.view is not None and repo.objects.get(rec.view).meta["fork"] == fork:
            out.append(h)
        h = rec.parent
    return out


@pytest.mark.parametrize("point", BEFORE_COMMIT_POINT + AFTER_COMMIT_POINT)
def test_killed_commit_lands_exactly_once(tmp_path: Path, point: str) -> None:
    repo = Repo.init(tmp_path)
    kernel.fork(repo, "a")
    kernel.put(repo, "a", "x.txt", b"state")
    kernel.effect(repo, "a", "fs", {"action": "write", "path": "out/a.txt", "content": "fired"})
    view_id = repo.refs["refs/views/a"]

    killed = reel(tmp_path, "commit", "a", crash=point)
    assert killed.returncode == -signal.SIGKILL, killed.stderr.decode()

    retry = reel(tmp_path, "commit", "a")
    assert retry.returncode == (0 if point in BEFORE_COMMIT_POINT else 8), retry.stderr.decode()
    recovered = reel(tmp_path, "recover")
    assert recovered.returncode == 0, recovered.stderr.decode()
    again = reel(tmp_path, "commit", "a")
    assert again.returncode == 8 and b"E008" in again.stderr

    repo = Repo.open(tmp_path)
    (record,) = records_naming(repo, view_id)
    assert repo.refs.get("refs/views/a") is None
    assert (tmp_path / "out" / "a.txt").read_text() == "fired"
    op = record_ops(repo, "main", record)[0]
    entries = [e for e in drainlog.walk(repo, repo.refs["refs/drains/main"]) if e.op == op]
    assert [e.state for e in entries] == ["succeeded", "unknown"], "sent more than once, or not settled"


def test_killed_abort_never_fires(tmp_path: Path) -> None:
    repo = Repo.init(tmp_path)
    kernel.fork(repo, "b")
    kernel.effect(repo, "b", "fs", {"action": "write", "path": "out/b.txt", "content": "never"})
    assert reel(tmp_path, "abort", "b").returncode == 0
    assert reel(tmp_path, "recover").returncode == 0
    assert reel(tmp_path, "commit", "b").returncode == 8
    assert not (tmp_path / "out" / "b.txt").exists()


WORKER = textwrap.dedent("""
    import sys
    from reelstore import Store
    store = Store.open(sys.argv[1])
    who, count = sys.argv[2], int(sys.argv[3])
    for i in range(count):
        with store.view(f"{who}-{i}") as v:
            v.put(f"{who}/{i}", f"{who} {i}")
""")


def test_two_processes_commit_concurrently_one_record_per_view(tmp_path: Path) -> None:
    Repo.init(tmp_path)
    count = 12
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(tmp_path), who, str(count)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for who in ("p", "q")
    ]
    for p in procs:
        _, err = p.communicate(timeout=240)
        assert p.returncode == 0, err.decode()
    repo = Repo.open(tmp_path)
    names = []
    h = repo.refs["refs/heads/main"]
    while h is not None:
        rec = repo.objects.get(h)
        if rec.view is not None:
            names.append(repo.objects.get(rec.view).meta["name"])
        h = rec.parent
    want = {f"{who}-{i}" for who in ("p", "q") for i in range(count)}
    assert sorted(names) == sorted(want)
    top = repo.objects.get(repo.refs["refs/heads/main"])
    ns = kernel.namespace(repo)
    assert {n for n, _ in ns.items(top.namespace)} == {f"{who}/{i}" for who in ("p", "q") for i in range(count)}


@pytest.mark.parametrize("point", ["commit:checked", "commit:advanced", "commit:logged"])
def test_killed_merge_into_parent_lands_exactly_once(tmp_path: Path, point: str) -> None:
    repo = Repo.init(tmp_path)
    kernel.fork(repo, "p")
    kernel.fork(repo, "c", source="p")
    kernel.put(repo, "c", "child.txt", b"c")
    kernel.effect(repo, "c", "fs", {"action": "write", "path": "out/c.txt", "content": "merged"})

    killed = reel(tmp_path, "commit", "c", crash=point)
    assert killed.returncode == -signal.SIGKILL, killed.stderr.decode()
    retry = reel(tmp_path, "commit", "c")
    assert retry.returncode == (0 if point == "commit:checked" else 8), retry.stderr.decode()

    repo = Repo.open(tmp_path)
    assert repo.refs.get("refs/views/c") is None
    status = inspection.status(repo, "p")
    assert [c.name for c in status.changes] == ["child.txt"]
    assert [e.resource for e in status.effects] == ["fs:out/c.txt"]
    assert len(status.merged) == 1
    assert not (tmp_path / "out").exists()
