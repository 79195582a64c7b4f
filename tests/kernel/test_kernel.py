"""The verbs on an in-memory store and on disk: fork, Class A writes, commit, rebase, abort, terminal views."""

from __future__ import annotations

import json

import pytest

from reelstore.backend.repo import Repo
from reelstore.errors import (
    BadInput,
    CapabilityViolation,
    Conflict,
    ForkDepthExceeded,
    NotFound,
    ViewTerminal,
)
from reelstore.kernel import inspection
from reelstore.kernel import verbs as kernel
from reelstore.objects import Capability, Record


def head_record(repo: Repo) -> Record:
    rec = repo.objects.get(repo.refs["refs/heads/main"])
    assert isinstance(rec, Record)
    return rec


def trunk_names(repo: Repo) -> dict[str, bytes]:
    ns = kernel.namespace(repo)
    return {n: repo.objects.get(h).data for n, h in ns.items(head_record(repo).namespace)}


def test_fork_put_get_commit(mem: Repo) -> None:
    kernel.fork(mem, "a")
    kernel.put(mem, "a", "x.txt", b"one")
    kernel.put(mem, "a", "y.txt", b"two")
    kernel.rm(mem, "a", "y.txt")
    assert kernel.get(mem, "a", "x.txt") == b"one"
    assert [n for n, _ in kernel.ls(mem, "a")] == ["x.txt"]
    assert [op.name for op in inspection.status(mem, "a").changes] == ["x.txt"]
    res = kernel.commit(mem, "a", "first")
    assert res.record == mem.refs["refs/heads/main"]
    assert head_record(mem).message == "first"
    assert trunk_names(mem) == {"x.txt": b"one"}
    assert mem.refs.get("refs/views/a") is None


def test_fork_is_isolated(mem: Repo) -> None:
    kernel.fork(mem, "a")
    kernel.fork(mem, "b")
    kernel.put(mem, "a", "x", b"a's")
    with pytest.raises(NotFound):
        kernel.get(mem, "b", "x")
    assert trunk_names(mem) == {}


def test_terminal_views_answer_e008(mem: Repo) -> None:
    kernel.fork(mem, "a")
    kernel.commit(mem, "a")
    kernel.fork(mem, "b")
    kernel.abort(mem, "b")
    for name in ("a", "b"):
        for verb in (
            lambda n: kernel.put(mem, n, "x", b""),
            lambda n: kernel.get(mem, n, "x"),
            lambda n: kernel.commit(mem, n),
            lambda n: kernel.abort(mem, n),
            lambda n: inspection.status(mem, n),
            lambda n: kernel.fork(mem, "c", source=n),
        ):
            with pytest.raises(ViewTerminal):
                verb(name)
    with pytest.raises(NotFound):
        kernel.put(mem, "never", "x", b"")


def test_rebase_onto_moved_trunk_without_conflict(mem: Repo) -> None:
    kernel.fork(mem, "a")
    kernel.fork(mem, "b")
    kernel.put(mem, "a", "a.txt", b"A")
    kernel.put(mem, "b", "b.txt", b"B")
    kernel.commit(mem, "a")
    kernel.commit(mem, "b")
    assert trunk_names(mem) == {"a.txt": b"A", "b.txt": b"B"}


def test_conflicting_rebase_is_e002_and_changes_nothing(mem: Repo) -> None:
    kernel.fork(mem, "a")
    kernel.fork(mem, "b")
    kernel.put(mem, "a", "same", b"A")
    kernel.put(mem, "b", "same", b"B")
    kernel.commit(mem, "a")
    head = mem.refs["refs/heads/main"]
    view = mem.refs["refs/views/b"]
    with pytest.raises(Conflict):
        kernel.commit(mem, "b")
    assert mem.refs["refs/heads/main"] == head
    assert mem.refs["refs/views/b"] == view


def test_identical_change_on_both_sides_is_not_a_conflict(mem: Repo) -> None:
    kernel.fork(mem, "a")
    kernel.fork(mem, "b")
    kernel.put(mem, "a", "same", b"S")
    kernel.put(mem, "b", "same", b"S")
    kernel.commit(mem, "a")
    kernel.commit(mem, "b")
    assert trunk_names(mem) == {"same": b"S"}


def test_isolated_child_merges_into_parent_and_fires_nothing(mem: Repo) -> None:
    kernel.fork(mem, "p")
    kernel.fork(mem, "c", source="p")
    kernel.put(mem, "c", "child.txt", b"c")
    res = kernel.commit(mem, "c")
    assert res.record is None and res.parent_view == mem.refs["refs/views/p"]
    assert kernel.get(mem, "p", "child.txt") == b"c"
    assert trunk_names(mem) == {}
    kernel.commit(mem, "p")
    assert trunk_names(mem) == {"child.txt": b"c"}


def test_reverting_a_change_empties_the_delta(mem: Repo) -> None:
    kernel.fork(mem, "a")
    kernel.put(mem, "a", "x", b"1")
    kernel.commit(mem, "a")
    kernel.fork(mem, "b")
    kernel.put(mem, "b", "x", b"2")
    kernel.put(mem, "b", "x", b"1")
    assert inspection.status(mem, "b").changes == ()
    kernel.put(mem, "b", "new", b"n")
    kernel.rm(mem, "b", "new")
    assert inspection.diff(mem, "b") == []


def test_abort_aborts_live_descendants(mem: Repo) -> None:
    kernel.fork(mem, "p")
    kernel.fork(mem, "c", source="p")
    kernel.fork(mem, "g", source="c")
    kernel.fork(mem, "other")
    assert kernel.abort(mem, "p") == ["g", "c", "p"]
    assert [r for r, _ in mem.refs.list("refs/views/")] == ["refs/views/other"]


def test_capabilities_checked_on_class_a(mem: Repo) -> None:
    kernel.fork(mem, "a", caps=[Capability.parse("read,write=docs/")])
    kernel.put(mem, "a", "docs/x", b"ok")
    with pytest.raises(CapabilityViolation):
        kernel.put(mem, "a", "docs-x", b"no")
    with pytest.raises(CapabilityViolation):
        kernel.rm(mem, "a", "docs/x")
    with pytest.raises(CapabilityViolation):
        kernel.get(mem, "a", "secret")


@pytest.mark.parametrize(
    ("parent", "child", "axis"),
    [
        ("read=docs/", "read,write=docs/", "ops"),
        ("read=docs/", "read=", "prefix"),
        ("read=docs/", "read=docs-x/", "prefix"),
        ("read=;expires=2030-01-01T00:00:00Z", "read=", "expiry"),
        ("read=;expires=2030-01-01T00:00:00Z", "read=;expires=2031-01-01T00:00:00Z", "expiry"),
        ("fire_c=;budget=3", "fire_c=", "budget"),
        ("fire_c=;budget=3", "fire_c=;budget=4", "budget"),
    ],
)
def test_widening_is_refused_naming_the_axis(mem: Repo, parent: str, child: str, axis: str) -> None:
    kernel.fork(mem, "p", caps=[Capability.parse(parent)])
    with pytest.raises(CapabilityViolation) as err:
        kernel.fork(mem, "c", source="p", caps=[Capability.parse(child)])
    assert err.value.details["axis"] == axis
    assert mem.refs.get("refs/views/c") is None


def test_fork_depth_is_bounded(mem: Repo) -> None:
    kernel.fork(mem, "v1")
    for i in range(2, 65):
        kernel.fork(mem, f"v{i}", source=f"v{i - 1}")
    with pytest.raises(ForkDepthExceeded):
        kernel.fork(mem, "v65", source="v64")


def test_fork_name_taken_and_bad_names(mem: Repo) -> None:
    kernel.fork(mem, "a")
    with pytest.raises(Conflict):
        kernel.fork(mem, "a")
    for bad in ("", "a b", "x..y", "refs/views/z"):
        with pytest.raises(BadInput):
            kernel.fork(mem, bad)
    with pytest.raises(NotFound):
        kernel.fork(mem, "z", source="nosuchtrunk")


def test_name_can_be_reused_after_abort(mem: Repo) -> None:
    kernel.fork(mem, "a")
    kernel.abort(mem, "a")
    kernel.fork(mem, "a")
    kernel.put(mem, "a", "x", b"again")
    kernel.commit(mem, "a")
    assert trunk_names(mem) == {"x": b"again"}


def test_disk_store_round_trip(repo: Repo) -> None:
    kernel.fork(repo, "a")
    kernel.put(repo, "a", "dir/f", b"data")
    again = Repo.open(repo.path)
    assert kernel.get(again, "a", "dir/f") == b"data"
    kernel.commit(again, "a")
    kernel.fork(again, "b")
    kernel.abort(again, "b")
    lines = [json.loads(line) for line in (repo.path / "logs" / "OPS").read_text().splitlines()]
    assert [line["verb"] for line in lines if "view" in line] == ["fork", "commit", "fork", "abort"]


def test_children_of_a_committed_parent_never_merge_into_a_namesake(mem: Repo) -> None:
    kernel.fork(mem, "p")
    kernel.fork(mem, "c", source="p")
    kernel.put(mem, "c", "orphan", b"o")
    kernel.commit(mem, "p")
    kernel.fork(mem, "p")
    with pytest.raises(ViewTerminal):
        kernel.commit(mem, "c")
    assert kernel.abort(mem, "p") == ["p"]
    assert kernel.abort(mem, "c") == ["c"]
    assert trunk_names(mem) == {}
