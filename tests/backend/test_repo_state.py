"""The repo owns its state: state files behave alike in memory and on disk, the verb log follows
appends made through another open store, and per-store state dies with its store."""

from __future__ import annotations

import gc
import threading
import weakref
from pathlib import Path

import pytest

from reelstore.backend.repo import Repo
from reelstore.backend.state_files import DiskFiles, MemoryFiles, StateFiles
from reelstore.errors import BadInput, Conflict
from reelstore.kernel import verbs as kernel
from reelstore.objects import Hash


@pytest.fixture(params=["memory", "disk"])
def files(request: pytest.FixtureRequest, tmp_path: Path) -> StateFiles:
    return MemoryFiles() if request.param == "memory" else DiskFiles(tmp_path, fsync=False)


def test_state_files_read_write_append_tail(files: StateFiles) -> None:
    assert files.read("x") is None
    files.write("x", b"one")
    files.write("x", b"two")
    assert files.read("x") == b"two"
    files.append("logs/L", b"a\n")
    files.append("logs/L", b"b\n")
    assert files.tail("logs/L", 0) == b"a\nb\n"
    assert files.tail("logs/L", 2) == b"b\n"
    assert files.tail("logs/L", 4) == b""
    files.write("logs/L", b"c\n")
    assert files.tail("logs/L", 4) is None  # replaced by something shorter: read again from 0
    files.remove("x")
    files.remove("x")
    assert files.read("x") is None


def test_create_is_exclusive(files: StateFiles) -> None:
    assert files.create("lock", b"me")
    assert not files.create("lock", b"you")
    assert files.read("lock") == b"me"


def test_lock_excludes_other_threads(files: StateFiles) -> None:
    held, outcome = threading.Event(), []

    def other() -> None:
        try:
            with files.lock("l.lock", 0.05):
                outcome.append("got it")
        except Conflict as err:
            outcome.append(err.code)

    with files.lock("l.lock", 1):
        held.set()
        t = threading.Thread(target=other)
        t.start()
        t.join(10)
    assert outcome == ["E002"]


def test_memory_store_has_no_hooks_and_no_directories() -> None:
    files = MemoryFiles()
    assert files.executable("hooks/pre-commit") is None
    with pytest.raises(BadInput, match="sync needs a store on disk"):
        files.directory("sync", "sync")


def test_verb_log_follows_another_open_store(tmp_path: Path) -> None:
    first = Repo.init(tmp_path)
    second = Repo.open(tmp_path)
    kernel.fork(first, "v")
    assert second.verbs.last_end("v") is None and second.verbs.last("v").verb == "fork"  # type: ignore[union-attr]
    kernel.commit(first, "v")
    end = second.verbs.last_end("v")
    assert end is not None and end.verb == "commit"
    first.verbs.append("abort", "w", Hash.of(b"w"))
    assert second.verbs.last_end("w").verb == "abort"  # type: ignore[union-attr]
    assert [e.verb for e in second.verbs.entries()] == ["fork", "commit", "abort"]


def test_a_half_written_line_is_read_once_it_is_whole() -> None:
    repo = Repo.memory()
    line = (
        b'{"detail":"","message":"abort half","op":"1","principal":"","time":1,"verb":"abort","view":"half",'
        b'"view_id":"00ff"}\n'
    )
    repo.files.append("logs/OPS", line[:40])
    assert repo.verbs.last("half") is None
    repo.files.append("logs/OPS", line[40:])
    entry = repo.verbs.last("half")
    assert entry is not None and entry.view == "00ff"


def test_per_store_state_lives_and_dies_with_the_store() -> None:
    repo = Repo.memory()
    ns = kernel.namespace(repo)
    assert kernel.namespace(repo) is ns
    assert kernel.namespace(Repo.memory()) is not ns
    gone = weakref.ref(ns)
    del repo, ns
    gc.collect()
    assert gone() is None
