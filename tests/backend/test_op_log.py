"""The operation log and undo: every verb that moves refs leaves one operation naming its refs' old and
new values; `reel undo` puts the newest one back by compare-and-swap, and refuses what it must not undo."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
from pathlib import Path

import pytest
from conftest import REEL

from reelstore.aio import AsyncStore
from reelstore.api import Store
from reelstore.backend.op_log import OpLog, operation
from reelstore.backend.refdb.ref_format import format_loose
from reelstore.backend.repo import Repo
from reelstore.errors import BadInput, Conflict, NotFound, ViewTerminal
from reelstore.kernel import snapshot
from reelstore.kernel import verbs as kernel
from reelstore.kernel.undo import undo
from reelstore.kernel.views import load_live
from reelstore.maintenance.gc import gc
from reelstore.objects import Record

FS_WRITE = json.dumps({"action": "write", "path": "out.txt", "content": "x\n"})


def newest(repo: Repo) -> tuple[str, str, list[tuple[str, bool, bool]]]:
    """The newest operation's verb, principal and (ref, had a value before, has one after)."""
    op = repo.ops.operations()[-1]
    return op.verb, op.principal, [(m.ref, m.old is not None, m.new is not None) for m in op.net()]


def test_each_verb_that_moves_refs_is_one_operation(any_repo: Repo) -> None:
    kernel.fork(any_repo, "v")
    assert newest(any_repo) == ("fork", any_repo.principal(), [("refs/views/v", False, True)])
    kernel.put(any_repo, "v", "a", b"1")
    assert newest(any_repo)[0] == "put"
    kernel.rm(any_repo, "v", "a")
    assert newest(any_repo)[0] == "rm"
    snapshot.take(any_repo, "v", "s")
    assert newest(any_repo)[::2] == ("snapshot", [("refs/snapshots/s", False, True)])
    kernel.put(any_repo, "v", "b", b"2")
    kernel.commit(any_repo, "v")  # two ref transactions (the trunk's CAS, then the view's retirement): one operation
    assert newest(any_repo)[::2] == ("commit", [("refs/heads/main", True, True), ("refs/views/v", True, False)])
    snapshot.restore(any_repo, "s", "r")
    assert newest(any_repo)[::2] == ("restore", [("refs/views/r", False, True)])
    kernel.abort(any_repo, "r")
    assert newest(any_repo)[::2] == ("abort", [("refs/views/r", True, False)])
    assert [o.verb for o in any_repo.ops.operations()] == [
        "init",
        "fork",
        "put",
        "rm",
        "snapshot",
        "put",
        "commit",
        "restore",
        "abort",
    ]


def test_undo_puts_a_write_back_and_a_second_undo_redoes_it(any_repo: Repo) -> None:
    kernel.fork(any_repo, "v")
    kernel.put(any_repo, "v", "a", b"1")
    kernel.put(any_repo, "v", "a", b"2")
    done = undo(any_repo)
    assert done.op.verb == "put" and kernel.get(any_repo, "v", "a") == b"1"
    assert newest(any_repo)[0] == "undo"
    undo(any_repo)
    assert kernel.get(any_repo, "v", "a") == b"2"


def test_undo_of_a_commit_without_effects_brings_the_view_back(any_repo: Repo) -> None:
    kernel.fork(any_repo, "v")
    kernel.put(any_repo, "v", "a", b"1")
    before = any_repo.refs["refs/heads/main"]
    kernel.commit(any_repo, "v")
    undo(any_repo)
    assert any_repo.refs["refs/heads/main"] == before
    assert kernel.get(any_repo, "v", "a") == b"1"  # live again: its ref answers, not the log's commit mark
    kernel.commit(any_repo, "v")
    with pytest.raises(ViewTerminal, match="committed"):
        load_live(any_repo, "v")


def test_undo_of_an_abort_brings_the_view_back(any_repo: Repo) -> None:
    kernel.fork(any_repo, "v")
    kernel.put(any_repo, "v", "a", b"1")
    kernel.abort(any_repo, "v")
    undo(any_repo)
    assert kernel.get(any_repo, "v", "a") == b"1"


def test_a_ref_moved_since_refuses_with_nothing_changed(repo: Repo) -> None:
    """The log's newest line lost (a power cut may drop an unsynced one): the ref no longer holds what
    the newest operation left, so the compare-and-swap refuses and nothing moves."""
    kernel.fork(repo, "v")
    kernel.put(repo, "v", "a", b"1")
    log = repo.path / "logs" / "OPS"
    lines = log.read_bytes().splitlines(keepends=True)
    assert json.loads(lines[-1])["verb"] == "put"
    log.write_bytes(b"".join(lines[:-1]))
    fresh = Repo.open(repo.path)
    held = fresh.refs["refs/views/v"]
    moved = r"undo operation \w+ \(fork v from refs/heads/main\): cannot update ref refs/views/v"
    with pytest.raises(Conflict, match=moved):
        undo(fresh)
    assert fresh.refs["refs/views/v"] == held and fresh.ops.operations()[-1].verb == "fork"


def test_a_commit_whose_effects_drained_is_refused_and_says_so(repo: Repo, reel) -> None:
    reel("fork", "v", check=True)
    reel("effect", "v", "--adapter", "fs", "--op", FS_WRITE, check=True)
    reel("commit", "v", check=True)
    head = repo.refs["refs/heads/main"]
    refused = reel("undo")
    assert refused.returncode == 6, refused.stderr.decode()
    assert "E014" in refused.stderr.decode() and "already drained" in refused.stderr.decode()
    assert "Traceback" not in refused.stderr.decode()
    fresh = Repo.open(repo.path)
    assert fresh.refs["refs/heads/main"] == head and fresh.refs.get("refs/views/v") is None


def test_a_commit_whose_effects_are_not_yet_sent_is_refused_too(any_repo: Repo) -> None:
    """Committed effects belong to the drain: moving the trunk back would not unsend a later recover."""
    kernel.fork(any_repo, "v")
    kernel.effect(any_repo, "v", "fs", json.loads(FS_WRITE))
    with operation("commit"):  # a commit whose drain never ran (a crash just after its trunk moved)
        live = load_live(any_repo, "v")
        ref = any_repo.refs.transaction("commit v", "t")
        head = any_repo.refs["refs/heads/main"]
        record = Record(
            parent=head,
            namespace=live.view.namespace,
            effects=live.view.effects,
            view=live.id,
            author="t",
            message="m",
            time=1,
        )
        any_repo.objects.put_many([record])
        ref.update("refs/heads/main", record.id, head).delete("refs/views/v", live.id).commit()
    with pytest.raises(BadInput, match="committed and owed by the drain"):
        undo(any_repo)


def test_sync_and_drain_operations_are_not_undone(mem: Repo) -> None:
    mem.refs.set("refs/remotes/origin/main", mem.refs["refs/heads/main"], None, message="fetch origin")
    with pytest.raises(BadInput, match="a fetch is not"):
        undo(mem)
    empty = Repo.memory()
    empty.ops.files.write("logs/OPS", b"")
    with pytest.raises(NotFound, match="empty"):
        undo(empty)


def test_the_log_is_one_file_and_the_verb_marks_live_in_it(tmp_path: Path) -> None:
    repo = Repo.init(tmp_path)
    kernel.fork(repo, "v")
    kernel.abort(repo, "v")
    lines = [json.loads(line) for line in (repo.path / "logs" / "OPS").read_text().splitlines()]
    assert [(d["verb"], "view" in d) for d in lines] == [
        ("init", False),
        ("fork", False),
        ("fork", True),
        ("abort", False),
        ("abort", True),
    ]
    assert lines[3]["op"] == lines[4]["op"]  # the abort's ref line and its mark: one operation
    assert not (repo.path / "logs" / "VERBS").exists()
    assert [e.verb for e in OpLog(repo.files).lines() if e.view] == ["fork", "abort"]


def test_op_log_and_undo_on_the_command_line(tmp_path: Path, reel) -> None:
    Repo.init(tmp_path)
    reel("fork", "v", check=True)
    reel("put", "v", "a", "-", input=b"1", check=True)
    text = reel("op", "log", "-n", "1", check=True).stdout.decode()
    assert ": put a\n    refs/views/v " in text
    doc = json.loads(reel("op", "log", "--json", check=True).stdout)
    assert [o["verb"] for o in doc["operations"]] == ["put", "fork", "init"]
    assert doc["operations"][1]["refs"][0]["old"] is None
    out = reel("undo", "--json", check=True)
    assert json.loads(out.stdout)["undone"]["verb"] == "put"
    assert reel("get", "v", "a").returncode == 4  # the put is gone: E001


def test_a_write_killed_between_its_line_and_its_rename_is_redone_at_open(tmp_path: Path, reel) -> None:
    """SIGKILL once the put's line is durable in the operation log, before its ref is renamed into place:
    the next open redoes the ref from the line (breaking the dead writer's lock), so the log and the ref
    agree and undo reverts that put."""
    Repo.init(tmp_path)
    reel("fork", "v", check=True)
    reel("put", "v", "a", "-", input=b"1", check=True)
    before = Repo.open(tmp_path).refs["refs/views/v"]
    env = {k: v for k, v in os.environ.items() if k != "REEL_DIR"}
    killed = subprocess.run(
        [REEL, "put", "v", "b", "-"],
        input=b"2",
        cwd=tmp_path,
        capture_output=True,
        timeout=120,
        env={**env, "REEL_TEST_CRASH_AT": "refs:op-logged"},
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr.decode()
    ref = tmp_path / ".reel" / "refs" / "views" / "v"
    assert ref.with_name("v.lock").exists()
    repo = Repo.open(tmp_path)
    assert not ref.with_name("v.lock").exists()
    last = repo.ops.operations()[-1]
    assert last.message == "put b" and repo.refs["refs/views/v"] == last.net()[0].new != before
    assert reel("get", "v", "b", check=True).stdout == b"2"
    assert json.loads(reel("undo", "--json", check=True).stdout)["undone"]["message"] == "put b"
    assert Repo.open(tmp_path).refs["refs/views/v"] == before


def test_a_ref_moved_behind_the_logs_back_leaves_undo_refusing(tmp_path: Path, reel) -> None:
    """A ref file rewritten without a line in the log (by hand, or by a tool that does not log) to a value
    neither side of its newest line: opening the store leaves it alone, and undo refuses and moves nothing."""
    Repo.init(tmp_path)
    reel("fork", "w", check=True)
    reel("put", "w", "x", "-", input=b"0", check=True)
    other = Repo.open(tmp_path).refs["refs/views/w"]
    reel("fork", "v", check=True)
    reel("put", "v", "a", "-", input=b"1", check=True)
    reel("put", "v", "b", "-", input=b"2", check=True)
    ref = tmp_path / ".reel" / "refs" / "views" / "v"
    ref.write_bytes(format_loose("refs/views/v", other))
    assert Repo.open(tmp_path).refs["refs/views/v"] == other
    refused = reel("undo")
    assert refused.returncode == 5 and "E002" in refused.stderr.decode(), refused.stderr.decode()
    assert Repo.open(tmp_path).refs["refs/views/v"] == other


def test_an_abort_whose_view_gc_collected_is_not_undone(repo: Repo) -> None:
    kernel.fork(repo, "v")
    kernel.put(repo, "v", "a", b"collected with its view")
    kernel.abort(repo, "v")
    gc(repo, "now")
    with pytest.raises(NotFound, match="collected by gc"):
        undo(repo)
    assert repo.refs.get("refs/views/v") is None


def test_the_python_api_and_asyncio_api_list_and_undo_alike(tmp_path: Path) -> None:
    store = Store.init(tmp_path)
    store.fork("v").put("a", b"1")
    assert [o.verb for o in store.op_log(limit=2)] == ["put", "fork"]
    assert store.undo().op.verb == "put"

    async def main() -> tuple[list[str], str]:
        aio = AsyncStore.open(tmp_path)
        listed = [o.verb for o in await aio.op_log()]
        return listed, (await aio.undo()).op.verb

    listed, undone = asyncio.run(main())
    assert listed == ["undo", "put", "fork", "init"] and undone == "undo"  # the second undo redoes the put
    assert Store.open(tmp_path).open_view("v").get("a") == b"1"
