"""Effect admission (capabilities, budget, expiry, hold), merging children's effects, and the drain call."""

from __future__ import annotations

import time
from pathlib import Path

import kernel_helpers as kh
import pytest

from reelstore.backend.repo import Repo
from reelstore.drain import hold
from reelstore.errors import BadInput, BudgetExhausted, CapabilityViolation, Conflict, Held
from reelstore.kernel import admission, inspection
from reelstore.kernel import verbs as kernel
from reelstore.objects import Capability


@pytest.fixture(autouse=True)
def _clean() -> None:
    kh.reset()


def cap(spec: str) -> Capability:
    return Capability.parse(spec)


def test_effect_needs_fire_capability_on_its_resource(mem: Repo) -> None:
    kernel.fork(mem, "a", caps=[cap("fire_c=rec:ok/")])
    kernel.effect(mem, "a", "recorder", {"n": 1, "topic": "ok"})
    with pytest.raises(CapabilityViolation):
        kernel.effect(mem, "a", "recorder", {"n": 2, "topic": "ok-not"})
    kernel.fork(mem, "b", caps=[cap("read,write,fire_b=")])
    with pytest.raises(CapabilityViolation):
        kernel.effect(mem, "b", "recorder", {"n": 3})
    assert len(inspection.status(mem, "a").effects) == 1


def test_budget_counts_effects_including_merged_children(mem: Repo) -> None:
    kernel.fork(mem, "p", caps=[cap("read,write,fire_c=;budget=3")])
    kernel.effect(mem, "p", "recorder", {"n": 1})
    kernel.fork(mem, "c", source="p", caps=[cap("fire_c=;budget=2")])
    kernel.effect(mem, "c", "recorder", {"n": 2})
    kernel.effect(mem, "c", "recorder", {"n": 3})
    with pytest.raises(BudgetExhausted):
        kernel.effect(mem, "c", "recorder", {"n": 4})
    kernel.fork(mem, "d", source="p", caps=[cap("fire_c=;budget=1")])
    kernel.effect(mem, "d", "recorder", {"n": 5})
    kernel.commit(mem, "c")
    assert [e.op["n"] for e in inspection.status(mem, "p").effects] == [1, 2, 3]
    with pytest.raises(BudgetExhausted):
        kernel.commit(mem, "d")
    with pytest.raises(BudgetExhausted):
        kernel.effect(mem, "p", "recorder", {"n": 6})


def test_budget_totals_follow_the_buffer_whoever_wrote_it(tmp_path: Path) -> None:
    """Admission checks running totals, kept per store handle for the buffer a transaction landed: a
    buffer another handle wrote since, or a fresh handle, counts what the buffer really holds, and an
    effect another capability pays for does not spend the budgeted one."""
    Repo.init(tmp_path)
    one, two = Repo.open(tmp_path), Repo.open(tmp_path)
    kernel.fork(one, "a", caps=[cap("read,write,fire_c=rec:x/;budget=3"), cap("fire_c=rec:y/")])
    with kernel.transaction(one, "a") as tx:
        tx.effect("recorder", {"n": 1, "topic": "x"})
        tx.effect("recorder", {"n": 2, "topic": "y"})
    kernel.effect(two, "a", "recorder", {"n": 3, "topic": "x"})
    with kernel.transaction(one, "a") as tx:
        tx.effect("recorder", {"n": 4, "topic": "x"})
        with pytest.raises(BudgetExhausted):
            tx.effect("recorder", {"n": 5, "topic": "x"})
        tx.effect("recorder", {"n": 6, "topic": "y"})
    for repo in (one, two, Repo.open(tmp_path)):
        with pytest.raises(BudgetExhausted):
            kernel.effect(repo, "a", "recorder", {"n": 7, "topic": "x"})
    assert [(e.op["n"], e.meta["seq"]) for e in inspection.status(one, "a").effects] == [
        (1, 0),
        (2, 1),
        (3, 2),
        (4, 3),
        (6, 4),
    ]


def test_expired_capability_refuses_with_e013(mem: Repo) -> None:
    kernel.fork(mem, "a", caps=[cap("read,write,fire_c=;expires=2001-01-01T00:00:00Z")])
    with pytest.raises(BudgetExhausted):
        kernel.effect(mem, "a", "recorder", {"n": 1})
    with pytest.raises(BudgetExhausted):
        kernel.put(mem, "a", "x", b"")


def test_a_capability_that_lapses_before_commit_fires_nothing(mem: Repo) -> None:
    deadline = admission.now_s() + 2
    kernel.fork(mem, "a", caps=[Capability.make(["fire_c"], "", expires_at=deadline)])
    kernel.effect(mem, "a", "recorder", {"n": 1})
    for _ in range(40):  # at most 4 s: the expiry has second resolution
        if admission.now_s() >= deadline:
            break
        time.sleep(0.1)
    head = mem.refs["refs/heads/main"]
    with pytest.raises(BudgetExhausted, match="expired"):
        kernel.commit(mem, "a")
    assert mem.refs["refs/heads/main"] == head and kh.FIRED == []
    kernel.abort(mem, "a")


def test_hold_stops_admission_and_commit(mem: Repo) -> None:
    kernel.fork(mem, "a")
    kernel.effect(mem, "a", "recorder", {"n": 1})
    hold.hold(mem, "investigating")
    with pytest.raises(Held):
        kernel.effect(mem, "a", "recorder", {"n": 2})
    head = mem.refs["refs/heads/main"]
    with pytest.raises(Held):
        kernel.commit(mem, "a")
    assert mem.refs["refs/heads/main"] == head and kh.FIRED == []
    hold.release(mem)
    kernel.commit(mem, "a")
    assert [n for _, n in kh.FIRED] == [1]


def test_a_handle_sees_every_hold_and_release_another_handle_writes(tmp_path: Path) -> None:
    """The hold is checked by the HOLD file's stat, its reason remembered per handle: a hold, a new
    reason, a release and a hold again, each written through another handle (as another process
    would), are all seen at the next admission, and a hand-edited file too."""
    Repo.init(tmp_path)
    agent, operator = Repo.open(tmp_path), Repo.open(tmp_path)
    kernel.fork(agent, "a")
    kernel.effect(agent, "a", "recorder", {"n": 1})
    for why in ("first", "second"):
        hold.hold(operator, why)
        with pytest.raises(Held, match=why):
            kernel.effect(agent, "a", "recorder", {"n": 2})
    hold.release(operator)
    kernel.effect(agent, "a", "recorder", {"n": 3})
    hold.hold(operator, "again")
    with pytest.raises(Held, match="again"):
        kernel.effect(agent, "a", "recorder", {"n": 4})
    (tmp_path / ".reel" / hold.FILE).write_text("edited by hand, longer than before")
    with pytest.raises(Held, match="edited by hand"):
        kernel.effect(agent, "a", "recorder", {"n": 5})
    hold.release(operator)
    kernel.effect(agent, "a", "recorder", {"n": 6})
    assert [e.op["n"] for e in inspection.status(agent, "a").effects] == [1, 3, 6]


def test_effects_fire_in_order_once_and_children_merge_without_firing(mem: Repo) -> None:
    kernel.fork(mem, "p")
    kernel.effect(mem, "p", "recorder", {"n": 1})
    kernel.fork(mem, "c", source="p")
    kernel.effect(mem, "c", "recorder", {"n": 2})
    kernel.commit(mem, "c")
    assert kh.FIRED == []
    kernel.effect(mem, "p", "recorder", {"n": 3})
    res = kernel.commit(mem, "p")
    assert [n for _, n in kh.FIRED] == [1, 2, 3]
    assert res.drain is not None and res.drain.complete


def test_aborting_a_parent_silences_merged_children(mem: Repo) -> None:
    kernel.fork(mem, "p")
    kernel.fork(mem, "c", source="p")
    kernel.effect(mem, "c", "recorder", {"n": 1})
    kernel.commit(mem, "c")
    kernel.abort(mem, "p")
    assert kh.FIRED == []


def test_autonomous_child_of_a_view_commits_to_the_trunk(mem: Repo) -> None:
    kernel.fork(mem, "p")
    kernel.put(mem, "p", "parent-only", b"p")
    kernel.fork(mem, "auto", source="p", boundary="autonomous")
    kernel.effect(mem, "auto", "recorder", {"n": 9})
    res = kernel.commit(mem, "auto")
    assert res.record == mem.refs["refs/heads/main"]
    assert [n for _, n in kh.FIRED] == [9]
    assert kernel.get(mem, "p", "parent-only") == b"p"


def test_bad_effects_and_unknown_adapters_are_e014(mem: Repo) -> None:
    kernel.fork(mem, "a")
    with pytest.raises(BadInput):
        kernel.effect(mem, "a", "recorder", {"no-n": 1})
    with pytest.raises(BadInput):
        kernel.effect(mem, "a", "recorder", {"n": float("nan")})
    with pytest.raises(BadInput, match="no adapter named 'no-such-adapter' can be loaded"):
        kernel.effect(mem, "a", "no-such-adapter", {"n": 1})
    with pytest.raises(BadInput):
        kernel.effect(mem, "a", "recorder", {"n": 1}, effect_class="B")
    assert inspection.status(mem, "a").effects == ()


def test_a_write_racing_the_commit_makes_it_fail_cleanly(mem: Repo) -> None:
    from reelstore.crashpoints import hooked

    kernel.fork(mem, "a")
    kernel.put(mem, "a", "x", b"1")
    kernel.effect(mem, "a", "recorder", {"n": 1})
    head = mem.refs["refs/heads/main"]

    def racing_writer(point: str) -> None:
        if point == "commit:record-written":
            kernel.effect(mem, "a", "recorder", {"n": 2})

    with hooked(racing_writer):
        with pytest.raises(Conflict):
            kernel.commit(mem, "a")
    assert mem.refs["refs/heads/main"] == head and kh.FIRED == []
    res = kernel.commit(mem, "a")
    assert [n for _, n in kh.FIRED] == [1, 2]
    committed = mem.objects.get(mem.objects.get(res.record).view)
    assert mem.objects.get(committed.delta).ops[0][1] == "x"


def test_an_abort_racing_the_commit_wins_and_nothing_fires(mem: Repo) -> None:
    from reelstore.crashpoints import hooked

    kernel.fork(mem, "a")
    kernel.effect(mem, "a", "recorder", {"n": 1})
    head = mem.refs["refs/heads/main"]

    def racing_abort(point: str) -> None:
        if point == "commit:record-written":
            assert kernel.abort(mem, "a") == ["a"]

    with hooked(racing_abort):
        with pytest.raises(kernel.ViewTerminal):
            kernel.commit(mem, "a")
    assert mem.refs["refs/heads/main"] == head and kh.FIRED == []


def test_an_abort_after_the_commit_point_is_refused(mem: Repo) -> None:
    from reelstore.crashpoints import hooked

    kernel.fork(mem, "a")
    kernel.effect(mem, "a", "recorder", {"n": 1})
    refused = []

    def late_abort(point: str) -> None:
        if point == "commit:advanced":
            with pytest.raises(kernel.ViewTerminal):
                kernel.abort(mem, "a")
            refused.append(point)

    with hooked(late_abort):
        kernel.commit(mem, "a")
    assert refused and [n for _, n in kh.FIRED] == [1]
