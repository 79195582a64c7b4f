"""Approvals: an effect a rule marks `approval = required` fires only after principals other than the
view's initiator approved exactly what fires; a change voids the approval; approvals travel with the
view; fsck checks what a record carried. A real HTTP target's ledger is the oracle."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import REEL
from gitserver import bare
from target import Target, pay_op

from reelstore import sync
from reelstore.aio import AsyncStore
from reelstore.api import Store
from reelstore.backend.repo import Repo
from reelstore.errors import ApprovalRequired, CapabilityViolation, Conflict
from reelstore.kernel import approval
from reelstore.maintenance.fsck import fsck
from reelstore.objects import Approval, Record, View


@pytest.fixture
def target(tmp_path: Path) -> Iterator[Target]:
    with Target(tmp_path / "ledger.jsonl") as t:
        yield t


@pytest.fixture
def who(monkeypatch: pytest.MonkeyPatch):  # noqa: ANN201
    """Act as a named principal (REEL_PRINCIPAL), as each person's own shell would."""

    def act(name: str) -> None:
        monkeypatch.setenv("REEL_PRINCIPAL", name)

    act("agent")
    return act


def rule(repo: Repo, base: str, count: int | None = None, group: str | None = None) -> None:
    repo.config.set("service.pay.match", f"http:POST:{base}/blind")
    repo.config.set("service.pay.approval", "required")
    if count is not None:
        repo.config.set("service.pay.approval-count", str(count))
    if group is not None:
        repo.config.set("service.pay.approvers", group)


def test_a_pay_effect_fires_only_once_a_distinct_principal_approved_exactly_it(
    tmp_path: Path, target: Target, who
) -> None:  # noqa: ANN001
    store = Store.init(tmp_path / "s")
    rule(store.repo, target.url)
    view = store.fork("pay")
    view.effect("http", pay_op(target.url, "blind", 5))
    head, before = store.repo.refs["refs/heads/main"], store.repo.refs["refs/views/pay"]

    with pytest.raises(ApprovalRequired) as refused:
        store.commit("pay")
    assert refused.value.exit_status == 10 and refused.value.code == "E018"
    assert "rule pay (1 effect) needs 1 approver" in refused.value.message
    assert "initiator agent" in refused.value.message
    assert target.requests == 0 and target.ledger() == []
    assert store.repo.refs["refs/heads/main"] == head and store.repo.refs["refs/views/pay"] == before
    [waiting] = store.awaiting()
    assert waiting.view == "pay" and waiting.since > 0 and [n.service for n in waiting.needs] == ["pay"]

    with pytest.raises(CapabilityViolation, match="agent may not approve"):
        store.approve("pay", "agent")  # the initiator
    who("bob")
    with pytest.raises(CapabilityViolation, match="agent may not approve"):
        store.approve("pay", "agent")  # nor anyone naming the initiator
    who("agent")
    with pytest.raises(CapabilityViolation, match="agent may not approve"):
        store.approve("pay", "bob")  # nor the initiator's process writing another's name
    assert store.repo.refs["refs/views/pay"] == before

    who("bob")
    first = store.approve("pay", "bob", "looks right")
    assert (
        first.via == "REEL_PRINCIPAL"
        and first.principal == "bob"
        and first.effects == store.repo.cache.load(store.repo.refs["refs/views/pay"], View).effects
    )
    who("agent")
    view.effect("http", pay_op(target.url, "blind", 7))  # a change after the approval voids it
    with pytest.raises(ApprovalRequired, match="the approval by bob is stale") as stale:
        store.commit("pay")
    assert stale.value.details["stale"] == ["bob"]
    assert target.requests == 0

    who("bob")
    again = store.approve("pay", "bob")
    who("carol")  # anyone allowed to commit may commit once it is approved
    result = store.commit("pay")
    assert sorted(json.loads(e["body"])["amount"] for e in target.ledger()) == [5, 7]
    store.recover()
    assert target.requests == 2  # each effect once; recovery sends nothing more

    record = store.repo.objects.get_as(result.record, Record)
    committed = store.repo.objects.get_as(record.view, View)
    assert committed.approvals == (again.id,)  # exactly the approval that let them fire, not the stale one
    assert [a.by for a in approval.carried(store.repo, committed)] == ["bob"]
    store.gc(prune="now")  # the record reaches its view, and the view its approvals: gc keeps them
    assert [a.note for a in approval.carried(Repo.open(tmp_path / "s"), committed)] == [""]
    assert fsck(store.repo).clean


def test_two_approvers_from_a_group_one_is_not_enough(tmp_path: Path, target: Target, who) -> None:  # noqa: ANN001
    store = Store.init(tmp_path / "s")
    rule(store.repo, target.url, count=2, group="ops-leads")
    store.repo.config.set("group.ops-leads.member", "bob, dave")
    store.repo.config.set("group.ops-leads.member", "erin", add=True)
    store.fork("pay").effect("http", pay_op(target.url, "blind"))
    for name in ("bob", "carol"):  # carol is not in the group: hers does not count
        who(name)
        store.approve("pay", name)
    who("agent")
    with pytest.raises(ApprovalRequired, match="needs 2 approvers from group ops-leads: approved so far by bob"):
        store.commit("pay")
    who("bob")
    store.approve("pay", "bob")  # the same approver twice is still one approver
    with pytest.raises(ApprovalRequired):
        store.commit("pay")
    assert target.requests == 0
    who("erin")
    store.approve("pay", "erin")
    store.commit("pay")
    assert target.count("/blind") == 1


def test_a_put_after_approval_voids_it_and_a_refusal_holds_until_the_view_changes(
    tmp_path: Path, target: Target, who
) -> None:  # noqa: ANN001
    store = Store.init(tmp_path / "s")
    rule(store.repo, target.url)
    view = store.fork("pay")
    view.effect("http", pay_op(target.url, "blind"))
    who("bob")
    store.approve("pay", "bob")
    who("agent")
    view.put("invoice.txt", b"changed after the approval")
    with pytest.raises(ApprovalRequired, match="stale"):
        store.commit("pay")
    who("bob")
    store.approve("pay", "bob")
    who("dave")
    store.reject("pay", "dave", "amount is wrong")
    who("agent")
    with pytest.raises(ApprovalRequired, match=r"refused by dave \(amount is wrong\)") as refused:
        store.commit("pay")
    assert refused.value.details["rejected"] == ["dave"]
    assert target.requests == 0
    with pytest.raises(Conflict, match="review it again"):
        store.approve("pay", "bob", expect=store.repo.cache.load(store.repo.refs["refs/heads/main"], Record).namespace)
    view.put("invoice.txt", b"amount fixed")  # a change voids the refusal along with the approvals
    who("bob")
    store.approve("pay", "bob")
    who("agent")
    store.commit("pay")
    assert target.count("/blind") == 1


def test_the_cli_refuses_with_exit_10_lists_what_waits_and_shows_who_approved(tmp_path: Path, target: Target) -> None:
    d = tmp_path / "s"

    def reel(*args: str, as_: str = "agent") -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if k != "REEL_DIR"} | {"REEL_PRINCIPAL": as_}
        return subprocess.run([REEL, *args], cwd=d, env=env, capture_output=True, text=True, timeout=60)

    d.mkdir()
    assert reel("init").returncode == 0
    rule(Repo.open(d), target.url)
    assert reel("fork", "pay").returncode == 0
    op = json.dumps({"method": "POST", "url": f"{target.url}/blind/pay", "json": {"amount": 5}})
    assert reel("effect", "pay", "--adapter", "http", "--op", op).returncode == 0
    done = reel("commit", "pay")
    assert done.returncode == 10 and "E018" in done.stderr and "reel approve pay --by NAME" in done.stderr
    listed = reel("views", "--awaiting")
    assert listed.returncode == 0 and listed.stdout.startswith("pay\twaiting ") and "initiator agent" in listed.stdout
    refused = reel("reject", "pay", "--by", "erin", "-m", "wrong amount", as_="erin")
    assert refused.returncode == 0 and "rejected view pay" in refused.stdout
    [doc] = json.loads(reel("views", "--awaiting", "--json").stdout)["awaiting"]
    assert [r["by"] for r in doc["rejected"]] == ["erin"] and doc["needs"][0]["approved_by"] == []
    held = reel("commit", "pay")
    assert held.returncode == 10 and "refused by erin (wrong amount)" in held.stderr
    changed = subprocess.run(
        [REEL, "put", "pay", "note.txt", "-"],
        input="amount checked\n",
        cwd=d,
        text=True,
        env={k: v for k, v in os.environ.items() if k != "REEL_DIR"} | {"REEL_PRINCIPAL": "agent"},
        capture_output=True,
        timeout=60,
    )
    assert changed.returncode == 0, changed.stderr  # a change: erin's refusal is stale now
    mine = reel("approve", "pay", "--by", "agent")
    assert mine.returncode == 6 and "E009" in mine.stderr
    ok = reel("approve", "pay", "--by", "bob", "-m", "checked the amount", as_="bob")
    assert ok.returncode == 0 and "approved view pay" in ok.stdout and "principal from REEL_PRINCIPAL" in ok.stdout
    assert reel("views", "--awaiting").stdout == ""
    assert reel("commit", "pay").returncode == 0
    assert target.count("/blind") == 1
    shown = reel("show", "main")
    assert "approve by bob (recorded by bob, principal from REEL_PRINCIPAL)" in shown.stdout
    assert "checked the amount" in shown.stdout
    assert reel("fsck").returncode == 0


def test_approvals_travel_with_the_view_an_approver_on_a_clone_signs(tmp_path: Path, target: Target, who) -> None:  # noqa: ANN001
    remote = bare(tmp_path / "shared.git")
    a = Store.init(tmp_path / "a")
    rule(a.repo, target.url)
    a.fork("pay").effect("http", pay_op(target.url, "blind"))
    sync.add_remote(a.repo, "origin", str(remote))
    sync.push(a.repo, "origin")

    who("bob")  # another machine: bob clones, approves, pushes the signed view back
    b, _ = sync.clone(str(remote), tmp_path / "b")
    approval.approve(b, "pay", "bob")
    assert [r.status for r in sync.push(b, "origin").refs if r.ref == "refs/views/pay"] == ["fast-forward"]

    who("agent")
    env = {k: v for k, v in os.environ.items() if k != "REEL_DIR"}
    before = subprocess.run(
        [REEL, "commit", "pay", "--remote", "origin"],
        cwd=tmp_path / "a",
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert before.returncode == 10 and "E018" in before.stderr  # not fetched yet: no approval here
    sync.fetch(a.repo, "origin")
    done = subprocess.run(
        [REEL, "commit", "pay", "--remote", "origin"],
        cwd=tmp_path / "a",
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert target.count("/blind") == 1 and target.requests == 1
    head = Repo.open(tmp_path / "a").refs["refs/heads/main"]
    repo = Repo.open(tmp_path / "a")
    committed = repo.objects.get_as(repo.objects.get_as(head, Record).view, View)
    assert [x.by for x in approval.carried(repo, committed)] == ["bob"]


def test_the_notify_hook_runs_when_approval_is_needed_bounded(tmp_path: Path, target: Target, who) -> None:  # noqa: ANN001
    store = Store.init(tmp_path / "s")
    rule(store.repo, target.url, group="ops-leads")
    store.repo.config.set("group.ops-leads.member", "bob")
    log = tmp_path / "notices.log"
    hook = store.repo.path / "hooks" / "notify"
    hook.write_text(f'#!/bin/sh\necho "$REEL_NOTICE $REEL_VIEW $REEL_TO $REEL_INITIATOR" >> {log}\n')
    hook.chmod(0o755)
    view = store.fork("pay")
    view.effect("http", pay_op(target.url, "blind"))
    for _ in range(5):
        with pytest.raises(ApprovalRequired):
            store.commit("pay")
    assert log.read_text().splitlines() == ["approval pay ops-leads agent"] * 3  # ops.maxNotices, default 3
    view.effect("http", pay_op(target.url, "blind", 9))  # a new state to approve: it is told again
    with pytest.raises(ApprovalRequired):
        store.commit("pay")
    assert len(log.read_text().splitlines()) == 4
    assert target.requests == 0


def test_the_sample_pre_approve_hook_demands_a_signed_token(
    tmp_path: Path,
    target: Target,
    who,  # noqa: ANN001
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store = Store.init(tmp_path / "s")
    rule(store.repo, target.url)
    hook = store.repo.path / "hooks" / "pre-approve"
    hook.chmod(0o755)  # the installed sample, enabled
    (store.repo.path / "approvers").mkdir()
    (store.repo.path / "approvers" / "bob.key").write_text("bob's secret")
    store.fork("pay").effect("http", pay_op(target.url, "blind"))
    live = store.repo.cache.load(store.repo.refs["refs/views/pay"], View)
    assert live.effects is not None
    signed = subprocess.run(
        f"printf '%s %s' {live.effects.hex()} {live.namespace.hex()} | openssl dgst -sha256 "
        "-hmac \"bob's secret\" -r | cut -d' ' -f1",
        shell=True,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    who("bob")
    monkeypatch.setenv("REEL_APPROVAL_TOKEN", "0" * 64)
    with pytest.raises(CapabilityViolation, match="not bob's signature"):
        store.approve("pay", "bob")
    who("mallory")
    with pytest.raises(CapabilityViolation, match="no key for approver mallory"):
        store.approve("pay", "mallory")
    assert store.repo.refs["refs/views/pay"] == live.id
    who("bob")
    monkeypatch.setenv("REEL_APPROVAL_TOKEN", signed)
    store.approve("pay", "bob")
    store.commit("pay")
    assert target.count("/blind") == 1


def test_fsck_names_a_committed_approval_that_could_not_have_counted(tmp_path: Path, target: Target, who) -> None:  # noqa: ANN001
    store = Store.init(tmp_path / "s")
    rule(store.repo, target.url)
    store.fork("pay").effect("http", pay_op(target.url, "blind"))
    who("bob")
    store.approve("pay", "bob")
    result = store.commit("pay")
    repo = store.repo
    record = repo.objects.get_as(result.record, Record)
    view = repo.objects.get_as(record.view, View)
    forged = Approval(
        verdict="approve",
        view="pay",
        fork=str(view.meta["fork"]),
        effects=view.effects,
        namespace=view.namespace,
        by="agent",
        principal="agent",
        via="login",
        time=1,
    )
    bad_view = replace(view, approvals=(forged.id,))
    bad = replace(record, view=bad_view.id)
    repo.objects.put(forged)
    repo.objects.put(bad_view)
    repo.objects.put(bad)
    repo.refs.set("refs/heads/forged", bad.id, None, message="test", principal="test")
    problems = fsck(repo).problems
    assert any(f"approval {forged.id.hex()} does not hold" in p and "agent started the view" in p for p in problems)


def test_async_store_approves_and_lists_what_waits(tmp_path: Path, target: Target, who) -> None:  # noqa: ANN001
    store = Store.init(tmp_path / "s")
    rule(store.repo, target.url)
    store.fork("pay").effect("http", pay_op(target.url, "blind"))

    async def go() -> None:
        a = AsyncStore(store)
        assert [s.view for s in await a.awaiting()] == ["pay"]
        who("bob")
        got = await a.approve("pay", "bob")
        assert got.by == "bob"
        assert await a.awaiting() == []
        await a.commit("pay")

    asyncio.run(go())
    assert target.count("/blind") == 1
