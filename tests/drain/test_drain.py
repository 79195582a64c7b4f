"""The drain in process: the fire token, journal-before-send, halting, hold, fencing of zombies."""

from __future__ import annotations

import copy
import random

import pytest

from reelstore import crashpoints
from reelstore.backend.repo import Repo
from reelstore.drain import epoch, hold, recovery
from reelstore.drain import journal as drainlog
from reelstore.drain.drainer import FireToken, _mint, commit_message, drain, op_id, record_ops
from reelstore.errors import CapabilityViolation, Conflict, Held, OutcomeUnknown, StaleEpoch
from reelstore.objects import Effect, Effects, Hash, Record
from reelstore.sim.world import TIERS, Rates, World, attach, make_repo


def committed(repo: Repo, tiers: list[str]) -> Hash:
    """A record on main carrying one sim effect per tier, not yet drained."""
    head = repo.refs["refs/heads/main"]
    effects = [
        Effect("sim", "C", f"sim:{t}:{i}", {"tier": t, "id": f"e{i}"}, t, principal="tester")
        for i, t in enumerate(tiers)
    ]
    block = Effects(tuple(e.id for e in effects))
    rec = Record(head, repo.objects.get(head).namespace, block.id, author="tester", message="pay")
    repo.objects.put_many([*effects, block, rec])
    repo.refs.set("refs/heads/main", rec.id, head, message=commit_message("pay"))
    return rec.id


def sim_repo(**rates: float) -> tuple[Repo, World]:
    world = World(random.Random(1), Rates.calm())
    repo = make_repo(world)
    for k, v in rates.items():
        setattr(world.rates, k, v)
    return repo, world


def test_op_ids_are_stable_and_distinct() -> None:
    e = Hash.of(b"x")
    assert op_id(e, 0) == op_id(e) != op_id(e, 1) != op_id(Hash.of(b"y"), 1)
    assert op_id(e).startswith("op_") and len(op_id(e)) == 43


def test_op_id_is_the_effects_not_the_records() -> None:
    """The same effect committed in two different records has one id."""
    repo, _ = sim_repo()
    rec = committed(repo, ["keyed", "blind"])
    items = repo.objects.get_as(rec, Record).effects
    effects = repo.objects.get_as(items, Effects).items
    assert record_ops(repo, "main", rec) == [op_id(effects[0]), op_id(effects[1])]
    other = Record(
        parent=rec,
        namespace=repo.objects.get_as(rec, Record).namespace,
        effects=items,
        view=None,
        author="t",
        message="another record, same effects",
        time=1,
    )
    repo.objects.put(other)
    assert record_ops(repo, "main", other.id) == record_ops(repo, "main", rec)


def test_fire_token_is_minted_only_by_the_drain() -> None:
    repo, _ = sim_repo()
    with pytest.raises(CapabilityViolation):
        FireToken(Hash.of(b"e"), 0)
    forged = object.__new__(FireToken)
    with pytest.raises(CapabilityViolation, match="not minted"):
        forged.consume(Hash.of(b"e"))
    token = _mint(repo, Hash.of(b"e"), epoch.current(repo))
    for dup in (copy.copy, copy.deepcopy):
        with pytest.raises(CapabilityViolation):
            dup(token)
    with pytest.raises(CapabilityViolation, match="another effect"):
        token.consume(Hash.of(b"other"))
    token.consume(Hash.of(b"e"))
    with pytest.raises(CapabilityViolation, match="already used"):
        token.consume(Hash.of(b"e"))


def test_every_send_is_journaled_unknown_first() -> None:
    repo, world = sim_repo()
    seen: list[str] = []

    def hook(point: str) -> None:
        if point == "drain:before-send":
            seen.append(drainlog.index(repo, "main").latest[op].state)

    rec = committed(repo, ["keyed"])
    op = record_ops(repo, "main", rec)[0]
    with crashpoints.hooked(hook):
        report = drain(repo, "main", rec)
    assert seen == ["unknown"] and world.acted[op] == 1
    assert report.complete and [o.state for o in report.outcomes] == ["succeeded"]
    chain = list(drainlog.walk(repo, repo.refs["refs/drains/main"]))
    assert [e.state for e in chain] == ["succeeded", "unknown"] and chain[0].prev == chain[1].id
    assert drain(repo, "main", rec).outcomes[0].action == "already" and world.acted[op] == 1


def test_unknown_halts_the_drain_and_later_effects_wait() -> None:
    repo, world = sim_repo(lost_response=1.0)
    rec = committed(repo, ["blind", "keyed"])
    report = drain(repo, "main", rec)
    assert [o.state for o in report.outcomes] == ["unknown", "pending"]
    assert report.halted is not None and report.halted.index == 0
    assert world.acted[record_ops(repo, "main", rec)[1]] == 0
    with pytest.raises(OutcomeUnknown) as err:
        report.check()
    assert err.value.exit_status == 7 and "reel reconcile" in err.value.message
    world.rates = Rates.calm()
    again = recovery.recover(repo)
    ops = record_ops(repo, "main", rec)
    assert again.unknown == [ops[0]] and world.acted[ops[0]] == 1 and world.acted[ops[1]] == 0


@pytest.mark.parametrize("tier", ["keyed", "queryable", "two-phase"])
def test_recovery_settles_a_lost_answer_exactly_once(tier: str) -> None:
    repo, world = sim_repo(lost_response=1.0)
    rec = committed(repo, [tier, "blind"])
    assert drain(repo, "main", rec).halted is not None
    world.rates = Rates.calm()
    report = recovery.recover(repo)
    ops = record_ops(repo, "main", rec)
    assert report.unknown == [] and world.acted[ops[0]] == 1 and world.acted[ops[1]] == 1
    assert [o.action for o in report.drains[0].outcomes] == ["resent" if tier == "keyed" else "reconciled", "sent"]


def test_a_hold_stops_the_drain_before_anything_is_sent() -> None:
    repo, world = sim_repo()
    rec = committed(repo, ["keyed", "keyed"])
    hold.hold(repo, "audit", "ops")
    report = drain(repo, "main", rec)
    assert report.held == "audit" and not world.acted
    with pytest.raises(Held):
        report.check()
    with pytest.raises(Held):
        recovery.recover(repo)
    assert hold.release(repo).why == "audit" and hold.status(repo) is None
    assert drain(repo, "main", rec).complete and sum(world.acted.values()) == 2


@pytest.mark.parametrize("tier", TIERS)
@pytest.mark.parametrize("pause", ["drain:before-send", "drain:after-send"])
def test_a_zombie_drainer_is_fenced(tier: str, pause: str) -> None:
    """The drainer pauses; a recovery takes over under a new epoch; the zombie then resumes and may
    neither journal nor fire. The target still sees the effect at most once (exactly once if keyed,
    queryable or two-phase)."""
    repo, world = sim_repo()
    rec = committed(repo, [tier])
    op = record_ops(repo, "main", rec)[0]
    rescued: list[int] = []

    def hook(point: str) -> None:
        if point == pause and not rescued:
            crashpoints.set_hook(None)
            rescued.append(recovery.recover(repo).epoch)

    with crashpoints.hooked(hook):
        with pytest.raises(StaleEpoch):
            drain(repo, "main", rec)
    assert rescued == [epoch.current(repo)] == [1]
    epochs = [e.epoch for e in drainlog.walk(repo, repo.refs["refs/drains/main"])]
    assert epochs == sorted(epochs, reverse=True)
    expect = 1 if tier != "blind" or pause == "drain:after-send" else 0
    assert world.acted[op] == expect


def test_stale_epoch_cannot_journal_and_a_lost_per_op_race_is_a_conflict() -> None:
    repo, world = sim_repo()
    rec = committed(repo, ["keyed"])
    epoch.bump(repo)
    with pytest.raises(StaleEpoch):
        drain(repo, "main", rec, epoch=0)
    assert not world.acted and repo.refs.get("refs/drains/main") is None
    eff = repo.objects.get(repo.objects.get(repo.objects.get(rec).effects).items[0])
    step = drainlog.Step(rec, 0, eff.id, record_ops(repo, "main", rec)[0], "unknown", None)
    (first,) = drainlog.append(repo, "main", 1, step)
    with pytest.raises(Conflict):
        drainlog.append(repo, "main", 1, step)
    assert drainlog.index(repo, "main").latest[record_ops(repo, "main", rec)[0]] == first


def test_epoch_file_and_lock_on_disk(repo: Repo) -> None:
    assert epoch.current(repo) == 0
    assert epoch.bump(repo) == 1 and epoch.bump(repo) == 2
    assert (repo.path / "epoch").read_text() == "2\n"
    (repo.path / "epoch").write_text("garbage")
    with pytest.raises(Exception, match="damaged"):
        epoch.current(repo)


def test_a_refusing_pre_drain_hook_sends_nothing_and_leaves_effects_pending(repo: Repo) -> None:
    world = World(random.Random(2), Rates.calm())
    attach(repo, world)
    rec = committed(repo, ["keyed", "blind"])
    hook = repo.path / "hooks" / "pre-drain"
    hook.write_text('#!/bin/sh\necho "outside drain hours ($REEL_EFFECTS owed)" >&2\nexit 1\n')
    hook.chmod(0o755)
    with pytest.raises(CapabilityViolation, match="outside drain hours .2 owed."):
        drain(repo, "main", rec)
    assert not world.acted and repo.refs.get("refs/drains/main") is None
    hook.unlink()
    assert recovery.recover(repo).unknown == [] and sum(world.acted.values()) == 2


def test_recovery_leaves_an_operation_of_a_live_drainer_of_its_own_epoch_alone() -> None:
    """A commit that read the epoch after a recovery's bump drains under the same epoch; the recovery
    must not take over the intent that drainer just wrote (it may be on the wire)."""
    repo, world = sim_repo()
    rec = committed(repo, ["queryable", "keyed"])
    now = epoch.bump(repo)
    seen: list[list[str]] = []

    def hook(point: str) -> None:
        if point == "drain:before-send" and not seen:
            crashpoints.set_hook(None)
            rival = drain(repo, "main", rec, epoch=now, recovering=True)
            seen.append([o.action for o in rival.outcomes])

    with crashpoints.hooked(hook):
        report = drain(repo, "main", rec, epoch=now)
    assert seen == [["yielded", "not-reached"]] and report.complete
    assert world.acted[record_ops(repo, "main", rec)[0]] == 1 and world.acted[record_ops(repo, "main", rec)[1]] == 1
