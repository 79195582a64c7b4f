"""A view handle shared by threads (parallel tool calls): every call lands or raises, on a real store
on disk, whose write batches are per thread."""

from __future__ import annotations

import os
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from reelstore.api import Store, ViewHandle
from reelstore.errors import ViewTerminal

TRIALS = 1000


@pytest.fixture
def fast_dir(tmp_path: Path) -> Iterator[Path]:
    """A directory on tmpfs where there is one (the same disk store, without a slow disk's file
    creation: the thousand trials stay fast), else the test's own."""
    if not os.access("/dev/shm", os.W_OK):
        yield tmp_path
        return
    with tempfile.TemporaryDirectory(dir="/dev/shm") as d:
        yield Path(d)


def _store(tmp_path: Path) -> Store:
    Store.init(tmp_path / "s").repo.config.set("core.fsync", "false")
    return Store.open(tmp_path / "s")


def _put_and_effect(v: ViewHandle, i: int, k: int, gate: threading.Barrier, errors: list[BaseException]) -> None:
    try:
        gate.wait(timeout=10)
        v.put(f"notes/{i}-{k}", f"{i}-{k}")
        v.effect("fs", {"action": "write", "path": f"out/{i}-{k}", "content": f"{i}-{k}"})
    except BaseException as exc:
        errors.append(exc)


def test_two_threads_on_one_handle_lose_nothing(fast_dir: Path) -> None:
    """Each trial: two threads put a name and queue an fs write on one `Store.view` handle, released
    together; the block's commit must land both names and send both writes."""
    store = _store(fast_dir)
    lost: list[str] = []
    for i in range(TRIALS):
        gate = threading.Barrier(2)
        errors: list[BaseException] = []
        with store.view(f"t{i}", caps=["read,write=notes/", "fire_c=fs:out/"]) as v:
            threads = [threading.Thread(target=_put_and_effect, args=(v, i, k, gate, errors)) for k in range(2)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=30)
        assert errors == []
        assert v.result is not None and v.result.drain is not None
        if [o.state for o in v.result.drain.outcomes] != ["succeeded", "succeeded"]:
            lost.append(f"trial {i}: effects {[o.state for o in v.result.drain.outcomes]}")
    look = store.fork("look")
    for i in range(TRIALS):
        for k in range(2):
            try:
                if look.get(f"notes/{i}-{k}") != f"{i}-{k}".encode():
                    lost.append(f"trial {i}: notes/{i}-{k} has other content")
            except Exception as exc:  # a name whose content object was never written reads as E001/E007
                lost.append(f"trial {i}: notes/{i}-{k}: {exc}")
    assert lost == []
    written = sorted(p.name for p in (fast_dir / "s" / "out").iterdir())
    assert written == sorted(f"{i}-{k}" for i in range(TRIALS) for k in range(2))


def test_a_put_from_another_thread_is_readable_after_commit(tmp_path: Path) -> None:
    """The thread that opens the handle's transaction (and its write batch) is not the one that lands
    it, and is gone by then."""
    store = _store(tmp_path)

    def in_thread(fn: Callable[..., object], *args: object) -> None:
        t = threading.Thread(target=fn, args=args)
        t.start()
        t.join(timeout=30)

    with store.view("v") as v:
        in_thread(v.put, "a.txt", "opened in a thread")
        v.put("b.txt", "from the main thread")
        in_thread(v.flush)
        in_thread(v.put, "c.txt", "after a flush in a third thread")
    reopened = Store.open(tmp_path / "s").fork("look")
    assert reopened.get("a.txt") == b"opened in a thread"
    assert reopened.get("b.txt") == b"from the main thread"
    assert reopened.get("c.txt") == b"after a flush in a third thread"


def _keep_putting(
    v: ViewHandle, trial: int, landed: list[str], refused: list[BaseException], started: threading.Event
) -> None:
    for j in range(100_000):
        try:
            v.put(f"n/{trial}/{j}", b"x")
        except ViewTerminal as exc:
            refused.append(exc)
            return
        landed.append(f"n/{trial}/{j}")
        started.set()


def test_every_put_racing_a_commit_lands_or_raises(fast_dir: Path) -> None:
    """A thread keeps putting while another commits the shared handle: each put either returned and
    is in the trunk, or raised E008 (the view was committed); none returns and then vanishes."""
    store = _store(fast_dir)
    for trial in range(20):
        landed: list[str] = []
        refused: list[BaseException] = []
        started = threading.Event()
        with store.view(f"v{trial}") as v:
            t = threading.Thread(target=_keep_putting, args=(v, trial, landed, refused, started))
            t.start()
            assert started.wait(timeout=30)
            v.commit()
            t.join(timeout=30)
        assert len(refused) == 1, trial
        names = {n for n, _ in store.fork(f"look{trial}").ls(f"n/{trial}/")}
        assert set(landed) <= names, (trial, sorted(set(landed) - names)[:3])
