"""Transactions on a view and group commit: many changes land as one view object, one ref update and
one pack; a dropped or failed transaction leaves the view as it was; fsyncs per operation are bounded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from reelstore import Store
from reelstore.backend.disk_store import DiskObjectStore
from reelstore.backend.repo import Repo
from reelstore.errors import BadInput, CapabilityViolation, NotFound
from reelstore.kernel import inspection
from reelstore.kernel import verbs as kernel
from reelstore.objects import Capability, Record

REEL = [sys.executable, "-c", "from reelstore.cli.main import main; main()"]


def packs(repo: Repo) -> set[str]:
    assert isinstance(repo.objects, DiskObjectStore)
    return {p.name for p in (repo.path / "objects" / "pack").glob("*.pack")}  # type: ignore[operator]


@contextmanager
def fsynced_files() -> Iterator[list[str]]:
    """The paths of the files and directories os.fsync was called on in this process, in order (its
    length is the count of fsyncs)."""
    paths: list[str] = []
    real = os.fsync

    def counted(fd: int) -> None:
        paths.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    os.fsync = counted  # type: ignore[assignment]
    try:
        yield paths
    finally:
        os.fsync = real


def test_many_changes_land_as_one_view_one_ref_update_one_pack(repo: Repo) -> None:
    kernel.fork(repo, "v")
    kernel.put(repo, "v", "gone.txt", b"old")
    before_log = len(repo.refs.reflog("refs/views/v"))
    before_packs = packs(repo)
    with kernel.transaction(repo, "v") as tx:
        for i in range(200):
            tx.put(f"d/{i:03d}", b"payload %d" % i)
        tx.rm("gone.txt")
        tx.effect("fs", {"action": "write", "path": "out/x.txt", "content": "x"})
        assert repo.refs.reflog("refs/views/v")[-1].message == "put gone.txt"
    log = repo.refs.reflog("refs/views/v")
    assert len(log) == before_log + 1
    assert log[-1].message == "transaction: 200 put, 1 rm, 1 effect"
    assert len(packs(repo) - before_packs) == 1
    names = [n for n, _ in kernel.ls(repo, "v")]
    assert names == [f"d/{i:03d}" for i in range(200)]
    assert kernel.get(repo, "v", "d/007") == b"payload 7"
    assert len(inspection.status(repo, "v").effects) == 1


def test_dropped_transaction_leaves_view_and_store_as_they_were(repo: Repo) -> None:
    kernel.fork(repo, "v")
    at = repo.refs["refs/views/v"]
    before = packs(repo)
    with pytest.raises(RuntimeError):
        with kernel.transaction(repo, "v") as tx:
            tx.put("a", b"never")
            raise RuntimeError("the caller gave up")
    assert repo.refs["refs/views/v"] == at
    assert packs(repo) == before
    assert not [p for p in (repo.path / "objects" / "pack").iterdir() if p.name.startswith(".tmp-")]  # type: ignore[operator]


def test_refused_change_fails_where_it_is_made_and_the_rest_still_lands(repo: Repo) -> None:
    kernel.fork(repo, "v", caps=[Capability.parse("read,write,delete=docs/")])
    with kernel.transaction(repo, "v") as tx:
        tx.put("docs/a", b"1")
        with pytest.raises(CapabilityViolation):
            tx.put("src/b", b"2")
        with pytest.raises(NotFound):
            tx.rm("docs/missing")
        with pytest.raises(BadInput):
            tx.put("", b"3")
    assert [n for n, _ in kernel.ls(repo, "v")] == ["docs/a"]


def test_concurrent_write_is_kept_and_the_transaction_lands_on_top(repo: Repo) -> None:
    kernel.fork(repo, "v")
    tx = kernel.transaction(repo, "v")
    tx.put("mine", b"1")
    kernel.put(repo, "v", "theirs", b"2")
    tx.commit()
    assert [n for n, _ in kernel.ls(repo, "v")] == ["mine", "theirs"]


def test_store_view_block_is_one_transaction_unless_flushed(repo: Repo) -> None:
    store = Store(repo)
    with store.view("v") as v:
        v.put("a", b"1")
        v.put("b", b"2")
        assert repo.refs.reflog("refs/views/v")[-1].message.startswith("fork")
        assert v.get("a") == b"1" and [n for n, _ in v.ls()] == ["a", "b"]
        v.flush()
        assert repo.refs.reflog("refs/views/v")[-1].message == "transaction: 2 put, 0 rm, 0 effects"
        v.rm("a")
    assert v.result is not None and v.result.record is not None
    record = repo.objects.get_as(v.result.record, Record)
    assert [n for n, _ in kernel.namespace(repo).items(record.namespace)] == ["b"]
    with pytest.raises(ValueError):
        with store.view("w") as w:
            w.put("x", b"never")
            raise ValueError("abort the block")
    assert not w.live


def test_durable_put_and_fork_cost_at_most_four_fsyncs(repo: Repo) -> None:
    """Objects: one pack fsync + its directory (a fork's lone view: its loose file + its shard); the ref:
    its new value + its directory. A view's reflog and a fork's operation-log lines ride on that point (see
    VerbLog.append and backend/op_log)."""
    with fsynced_files() as calls:
        kernel.fork(repo, "v")
    assert len(calls) <= 4
    with fsynced_files() as calls:
        kernel.put(repo, "v", "a/b/c.txt", b"x" * 100)
    assert len(calls) <= 4
    with fsynced_files() as calls:
        with kernel.transaction(repo, "v") as tx:
            for i in range(300):
                tx.put(f"many/{i}", b"%d" % i)
    assert len(calls) <= 4


def test_torn_index_is_rebuilt_from_its_durable_pack(repo: Repo) -> None:
    kernel.fork(repo, "v")
    kernel.put(repo, "v", "x", b"survives")
    newest = max((repo.path / "objects" / "pack").glob("*.idx"), key=lambda p: p.stat().st_mtime_ns)  # type: ignore[operator]
    newest.write_bytes(newest.read_bytes()[:100])  # what a power cut may leave of an unsynced file
    fresh = Repo.open(repo.path)  # type: ignore[arg-type]
    assert kernel.get(fresh, "v", "x") == b"survives"


def test_cli_tree_import_and_stdin_paths(tmp_path: Path) -> None:
    def reel(*args: str, input: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run([*REEL, *args], cwd=tmp_path, input=input, capture_output=True, timeout=60)

    assert reel("init").returncode == 0
    assert reel("fork", "v").returncode == 0
    (tmp_path / "src" / "sub").mkdir(parents=True)
    (tmp_path / "src" / "a.txt").write_bytes(b"a")
    (tmp_path / "src" / "sub" / "b.sh").write_bytes(b"#!/bin/sh\n")
    os.chmod(tmp_path / "src" / "sub" / "b.sh", 0o755)
    os.symlink("a.txt", tmp_path / "src" / "link")
    os.symlink("sub", tmp_path / "src" / "dirlink")
    os.mkfifo(tmp_path / "src" / "pipe")
    done = reel("put", "v", "src")
    assert done.returncode == 0, done.stderr
    assert b"put 2 names" in done.stdout
    assert b"skipped src/link: symbolic link" in done.stderr
    assert b"skipped src/dirlink: symbolic link" in done.stderr
    assert b"skipped src/pipe: not a regular file" in done.stderr
    listed = reel("ls", "v").stdout.decode().split("\n")
    assert [line.split("\t")[1] for line in listed if line] == ["src/a.txt", "src/sub/b.sh"]
    (tmp_path / "c.txt").write_bytes(b"c")
    piped = reel("put", "v", "--stdin-paths", input=b"c.txt\nsrc/a.txt\n")
    assert piped.returncode == 0 and b"put 2 names" in piped.stdout
    assert reel("get", "v", "c.txt").stdout == b"c"
    outside = reel("put", "v", "--stdin-paths", input=b"/etc/hostname\n")
    assert outside.returncode != 0 and b"E014" in outside.stderr
    repo = Repo.open(tmp_path)
    assert [e.message for e in repo.refs.reflog("refs/views/v")][-2:] == [
        "transaction: 2 put, 0 rm, 0 effects",
        "transaction: 2 put, 0 rm, 0 effects",
    ]


def test_small_packs_are_rolled_up_geometrically_and_nothing_is_lost(repo: Repo) -> None:
    from reelstore.backend.disk_store import ROLL_UP_PACKS
    from reelstore.maintenance.fsck import fsck

    kernel.fork(repo, "v")
    for i in range(ROLL_UP_PACKS + 8):
        kernel.put(repo, "v", f"f{i:03d}", b"%d" % i)
    assert len(packs(repo)) <= ROLL_UP_PACKS + 1
    fresh = Repo.open(repo.path)  # type: ignore[arg-type]
    assert [kernel.get(fresh, "v", f"f{i:03d}") for i in range(ROLL_UP_PACKS + 8)] == [
        b"%d" % i for i in range(ROLL_UP_PACKS + 8)
    ]
    assert fsck(fresh).clean


def test_a_roll_up_holds_gcs_lock_and_waits_for_no_gc(repo: Repo) -> None:
    """A roll-up deletes the packs it merged; a gc beside it would see them go (index first, so as packs
    without an index) and refuse with E007. So it holds gc's lock, and is skipped while gc holds it."""
    from reelstore.backend.disk_store import ROLL_UP_PACKS
    from reelstore.crashpoints import hooked
    from reelstore.maintenance.fsck import fsck
    from reelstore.maintenance.lock import gc_lock

    lock = repo.path / "gc.lock"  # type: ignore[operator]
    kernel.fork(repo, "v")
    with gc_lock(repo):
        held = lock.read_bytes()
        for i in range(ROLL_UP_PACKS + 4):
            kernel.put(repo, "v", f"f{i:03d}", b"%d" % i)
        assert len(packs(repo)) > ROLL_UP_PACKS + 4  # every roll-up was skipped
        assert lock.read_bytes() == held  # and none took or removed gc's lock
    seen: list[bytes | None] = []

    def at(point: str) -> None:
        if point == "roll-up:written":
            seen.append(lock.read_bytes() if lock.exists() else None)

    with hooked(at):
        kernel.put(repo, "v", "last", b"x")
    assert len(seen) == 1 and seen[0] is not None and seen[0].split()[0] == str(os.getpid()).encode()
    assert not lock.exists() and len(packs(repo)) <= ROLL_UP_PACKS
    assert fsck(Repo.open(repo.path)).clean  # type: ignore[arg-type]


def test_each_thread_has_its_own_batch(repo: Repo) -> None:
    """One thread dropping its transaction never drops another's objects, nor sees them early."""
    import threading

    kernel.fork(repo, "a")
    kernel.fork(repo, "b")
    a = kernel.transaction(repo, "a")
    blob = a.put("kept", b"thread a")
    seen: list[bool] = []

    def other() -> None:
        seen.append(repo.objects.has(blob))
        with pytest.raises(RuntimeError):
            with kernel.transaction(repo, "b") as b:
                b.put("dropped", b"thread b")
                raise RuntimeError("drop b")

    t = threading.Thread(target=other)
    t.start()
    t.join()
    a.commit()
    assert seen == [False]
    assert kernel.get(Repo.open(repo.path), "a", "kept") == b"thread a"  # type: ignore[arg-type]


def test_every_verb_makes_its_refs_durable_by_the_operation_log_alone(repo: Repo) -> None:
    """The operation log is the refs' durability point: a fork, a commit and an abort each fsync its
    line; no ref file or ref directory is fsynced (recovery at open redoes a logged move)."""
    verbs = str(repo.path / "logs" / "OPS")
    with fsynced_files() as paths:
        kernel.fork(repo, "v")
    assert verbs in paths and not [p for p in paths if "/refs/" in p or p.endswith("/refs")]
    kernel.put(repo, "v", "a", b"1")
    with fsynced_files() as paths:
        kernel.commit(repo, "v")
    assert verbs in paths
    kernel.fork(repo, "w")
    with fsynced_files() as paths:
        kernel.abort(repo, "w")
    assert verbs in paths


def test_a_fork_line_lost_in_a_power_cut_changes_no_answer(repo: Repo) -> None:
    """A power cut may keep a fork's durable ref and lose its unsynced verb-log line: the view is live
    (its ref answers, not the log), and its commit, whose line is durable, is what the log reports."""
    from reelstore.errors import ViewTerminal
    from reelstore.kernel.views import load_live

    kernel.fork(repo, "x")
    kernel.abort(repo, "x")  # the log's newest line for x: abort
    kernel.fork(repo, "x")
    log = repo.path / "logs" / "OPS"
    lines = log.read_bytes().splitlines(keepends=True)
    assert [(json.loads(line)["verb"], json.loads(line)["message"]) for line in lines[-2:]] == [
        ("fork", "fork x from refs/heads/main"),
        ("fork", "fork x"),
    ]  # the ref's line, then the view's mark
    log.write_bytes(b"".join(lines[:-2]))  # what the cut leaves of the two unsynced lines
    fresh = Repo.open(repo.path)
    assert load_live(fresh, "x").id == fresh.refs["refs/views/x"]
    kernel.put(fresh, "x", "a", b"1")
    kernel.commit(fresh, "x")
    with pytest.raises(ViewTerminal, match="committed"):
        load_live(Repo.open(repo.path), "x")
