"""The Python API: Store, views as context managers, and the same errors as the command line."""

from __future__ import annotations

from pathlib import Path

import kernel_helpers as kh
import pytest

from reelstore import Store
from reelstore.errors import CapabilityViolation, NotFound, ViewTerminal


@pytest.fixture(autouse=True)
def _clean() -> None:
    kh.reset()


def test_view_commits_on_clean_exit(tmp_path: Path) -> None:
    store = Store.init(tmp_path)
    with store.view("attempt-1", caps=["read,write=docs/", "fire_c=rec:"]) as v:
        v.put("docs/plan.md", "the plan")
        v.effect("recorder", {"n": 1})
        assert v.get("docs/plan.md") == b"the plan"
        assert [n for n, _ in v.ls("docs/")] == ["docs/plan.md"]
    assert v.result is not None and v.result.record is not None
    assert [n for _, n in kh.FIRED] == [1]
    again = Store.open(tmp_path)
    assert [e.view for e in again.log()] == ["attempt-1", None]
    with pytest.raises(ViewTerminal):
        again.open_view("attempt-1")


def test_view_aborts_on_exception_and_fires_nothing() -> None:
    store = Store.memory()

    class Oops(Exception):
        pass

    with pytest.raises(Oops):
        with store.view("attempt-2") as v:
            v.effect("recorder", {"n": 2})
            raise Oops
    assert kh.FIRED == [] and store.views() == []
    with pytest.raises(ViewTerminal):
        v.put("x", b"")


def test_handles_forks_and_errors() -> None:
    store = Store.memory()
    parent = store.fork("p", caps=["read,write,fire_c="])
    child = parent.fork("c")
    child.put("c.txt", b"c")
    child.commit()
    assert parent.get("c.txt") == b"c"
    with pytest.raises(CapabilityViolation):
        parent.fork("wide", caps=["read,write,delete="])
    with pytest.raises(NotFound):
        store.open_view("nope")
    assert [v.name for v in store.views()] == ["p"]
    assert store.status("p").changes[0].name == "c.txt"
    assert parent.diff()[0].status == "added"
    assert parent.abort() == ["p"]


def test_view_block_may_end_the_view_itself() -> None:
    store = Store.memory()
    with store.view("done-early") as v:
        v.put("x", b"1")
        v.commit("explicit")
    assert v.result is not None and v.result.record is not None and not v.live
    assert store.log()[0].message == "explicit"
    with store.view("dropped") as w:
        w.abort()
    assert not w.live and [e.view for e in store.log()] == ["done-early", None]
