"""Concurrent committers share the operation log's fsync, and queue for their trunk instead of failing
on its ref lock."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from reelstore.api import Store
from reelstore.backend import fileio
from reelstore.backend.repo import Repo
from reelstore.kernel import verbs as kernel


def test_appenders_that_wait_on_one_fsync_share_the_next(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Eight threads append at once while the first append's fsync is slow: every line lands, and the
    ones that appended meanwhile are made durable together by one more fsync, not one each."""
    path = tmp_path / "log"
    calls: list[int] = []
    real = os.fsync

    def slow(fd: int) -> None:
        calls.append(fd)
        time.sleep(0.3)
        real(fd)

    monkeypatch.setattr(os, "fsync", slow)
    start = threading.Barrier(8)
    first = threading.Event()

    def one(i: int) -> None:
        start.wait()
        if i:
            first.wait(5)
            time.sleep(0.05)  # the first writer is in its fsync now
        else:
            threading.Timer(0.02, first.set).start()
        fileio.append_durably(path, b"line %d\n" % i)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(path.read_bytes().splitlines()) == sorted(b"line %d" % i for i in range(8))
    assert 1 < len(calls) <= 3


def test_a_group_record_of_another_file_is_not_taken_for_this_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The size an fsync covered is kept with the file's inode: a log replaced by a new file (same
    name, smaller) is fsynced again, not skipped on the old file's record."""
    path = tmp_path / "log"
    fileio.append_durably(path, b"x" * 1000 + b"\n")
    path.unlink()
    calls: list[int] = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (calls.append(fd), real(fd)))
    fileio.append_durably(path, b"y\n")
    assert calls and path.read_bytes() == b"y\n"


def test_sixteen_threads_commit_into_one_trunk_without_e002(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each thread with its own store handle commits small views into one trunk at once, with two
    attempts each rather than 64: every commit lands, each once, since they queue for the trunk rather
    than race for its ref lock and lose it."""
    from reelstore.kernel import transaction

    monkeypatch.setattr(kernel, "CAS_ATTEMPTS", 2)
    monkeypatch.setattr(transaction, "CAS_ATTEMPTS", 2)
    Store.init(tmp_path)
    errors: list[BaseException] = []

    def agent(who: int) -> None:
        store = Store.open(tmp_path)
        try:
            for i in range(3):
                with store.view(f"a{who}-{i}") as v:
                    v.put(f"agents/{who}/{i}.txt", b"x")
        except BaseException as exc:  # noqa: BLE001  (reported by the assertion below)
            errors.append(exc)

    threads = [threading.Thread(target=agent, args=(w,)) for w in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert errors == []
    repo = Repo.open(tmp_path)
    top = repo.objects.get(repo.refs["refs/heads/main"])
    names = {n for n, _ in kernel.namespace(repo).items(top.namespace)}
    assert names == {f"agents/{w}/{i}.txt" for w in range(16) for i in range(3)}


def test_a_lock_waiter_wakes_when_the_lock_is_released_and_gives_up_in_time(tmp_path: Path) -> None:
    """`flock_within` waits for a busy flock without polling: it gets the lock once its holder lets go,
    gives up after its wait otherwise, and a waiter that gave up leaves the lock free for the next."""
    import fcntl

    path = tmp_path / "queue"
    holder = os.open(path, os.O_RDWR | os.O_CREAT)
    fcntl.flock(holder, fcntl.LOCK_EX)
    late = os.open(path, os.O_RDWR)
    assert not fileio.flock_within(late, 0.2)  # still held: gave up
    os.close(late)
    waiter = os.open(path, os.O_RDWR)
    threading.Timer(0.2, lambda: fcntl.flock(holder, fcntl.LOCK_UN)).start()
    assert fileio.flock_within(waiter, 10)
    os.close(waiter)  # released: the helper of the waiter that gave up holds nothing either
    again = os.open(path, os.O_RDWR)
    assert fileio.flock_within(again, 2)
    os.close(again)
    os.close(holder)
