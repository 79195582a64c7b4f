"""The operator's contract on an unknown blind payment: assignment, escalation with a deadline, bounded
notices with their delivery results, acknowledgment, and closing with the uncertainty accepted — none
of which settles the operation or sends anything."""

from __future__ import annotations

import json
import os
from pathlib import Path

from crashed_drain import crashed_commit, reel
from target import Target

CONTRACT = (
    "operation",
    "state",
    "trunk",
    "record",
    "view",
    "effect",
    "principal",
    "assignee",
    "escalation",
    "intent",
    "evidence",
    "why",
    "next",
)


def _hook(tmp_path: Path, body: str) -> Path:
    hook = tmp_path / ".reel" / "hooks" / "notify"
    hook.write_text("#!/bin/sh\n" + body)
    os.chmod(hook, 0o755)
    return hook


def test_the_operator_flow_never_settles_or_sends(tmp_path: Path) -> None:
    with Target(tmp_path / "ledger.jsonl") as target:
        crashed_commit(tmp_path, target, "blind", "target-kills")
        sent = target.count("/")
        (doc,) = json.loads(reel(tmp_path, "ops", "--unresolved", "--json").stdout)
        op = doc["op"]

        shown = reel(tmp_path, "ops", "show", op).stdout.decode()
        labels = {line.split()[0] for line in shown.splitlines() if line and not line.startswith(" ")}
        assert set(CONTRACT) <= labels, shown
        assert "assignee   -" in shown

        assert reel(tmp_path, "ops", "assign", op, "--to", "alice", "--by", "lead").returncode == 0
        late = reel(tmp_path, "ops", "escalate", op, "--to", "bob", "--deadline", "2000-01-01T00:00:00Z")
        assert late.returncode == 0, late.stderr
        listing = reel(tmp_path, "ops").stdout.decode()
        assert "[assigned alice]" in listing and "[OVERDUE]" in listing

        none = reel(tmp_path, "--json", "ops", "notify")
        assert json.loads(none.stdout)["skipped"] == {op: "no executable .reel/hooks/notify"}
        phoned = reel(tmp_path, "ops", "ack", op, "--by", "carol", "--note", "reached by phone")
        assert phoned.returncode == 0, phoned.stderr  # an ack needs no delivered notice: they are recorded apart
        assert json.loads(reel(tmp_path, "ops", "show", op, "--json").stdout)["operator"]["notices"] == []

        inbox = tmp_path / "inbox.txt"
        _hook(tmp_path, f'echo "$REEL_TO $REEL_OP $REEL_OVERDUE" >> {inbox}\n')
        results = [json.loads(reel(tmp_path, "--json", "ops", "notify").stdout) for _ in range(4)]
        assert [len(r["sent"]) for r in results] == [1, 1, 1, 0]
        assert results[0]["sent"] == [{"op": op, "to": "bob", "result": "delivered"}]
        assert "3 notices already went to bob" in results[3]["skipped"][op]
        assert inbox.read_text().splitlines() == [f"bob {op} 1"] * 3

        assert reel(tmp_path, "ops", "ack", op, "--by", "bob", "--note", "looking").returncode == 0
        still = json.loads(reel(tmp_path, "ops", "--unresolved", "--json").stdout)
        assert [d["op"] for d in still] == [op] and still[0]["state"] == "unknown"
        operator = still[0]["operator"]
        assert operator["assignee"] == "alice" and operator["escalated_to"] == "bob" and operator["overdue"]
        assert len(operator["notices"]) == 3 and [a["by"] for a in operator["acks"]] == ["carol", "bob"]
        assert reel(tmp_path, "recover").returncode == 7  # an acknowledged alert lifts no halt

        refused = reel(tmp_path, "ops", "close", op, "--by", "bob")
        assert refused.returncode == 6 and b"--accept-uncertainty" in refused.stderr
        closed = reel(tmp_path, "ops", "close", op, "--by", "bob", "--accept-uncertainty", "--note", "vendor silent")
        assert closed.returncode == 0, closed.stderr
        after = json.loads(reel(tmp_path, "ops", "show", op, "--json").stdout)
        assert after["state"] == "unknown" and after["operator"]["closed"]["by"] == "bob"
        assert [h["state"] for h in after["history"]][-1] == "unknown"  # the journal keeps the uncertainty
        assert "closed, uncertainty accepted by bob" in reel(tmp_path, "ops", "show", op).stdout.decode()
        skipped = json.loads(reel(tmp_path, "--json", "ops", "notify").stdout)
        assert skipped["sent"] == [] and skipped["skipped"] == {op: "closed"}
        assert target.count("/") == sent  # nothing of all this sent anything


def test_a_failing_notifier_is_recorded_as_not_delivered(tmp_path: Path) -> None:
    with Target(tmp_path / "ledger.jsonl") as target:
        crashed_commit(tmp_path, target, "blind", "target-kills")
        (doc,) = json.loads(reel(tmp_path, "ops", "--unresolved", "--json").stdout)
        _hook(tmp_path, 'echo "pager unreachable" >&2; exit 3\n')
        out = json.loads(reel(tmp_path, "--json", "ops", "notify").stdout)
        assert out["sent"] == [
            {
                "op": doc["op"],
                "to": "unassigned",
                "result": "not delivered: the notify hook exited 3: pager unreachable",
            }
        ]
        bad = reel(tmp_path, "ops", "escalate", doc["op"], "--to", "bob", "--deadline", "soon")
        assert bad.returncode == 2


def test_findings_keep_source_and_scope_and_absence_obeys_the_evidence_rule(tmp_path: Path) -> None:
    with Target(tmp_path / "ledger.jsonl") as target:
        crashed_commit(tmp_path, target, "blind", "target-kills")
        (doc,) = json.loads(reel(tmp_path, "ops", "--unresolved", "--json").stdout)
        op = doc["op"]
        reel(tmp_path, "config", "service.pay.match", f"http:POST:{target.url}/blind")
        reel(tmp_path, "config", "service.pay.absence", "unprovable")
        refused = reel(tmp_path, "reconcile", op, "--outcome", "absent", "--evidence", "no row", "--observer", "al")
        assert refused.returncode == 6 and b"absence = unprovable" in refused.stderr
        reel(tmp_path, "config", "service.pay.absence", "provable")
        done = reel(
            tmp_path,
            "--json",
            "reconcile",
            op,
            "--outcome",
            "absent",
            "--evidence",
            "no row for it",
            "--observer",
            "al",
            "--source",
            "payments API export",
            "--scope",
            "account 42, 2026-12-01",
        )
        assert done.returncode == 0, done.stderr
        finding = json.loads(done.stdout)["finding"]
        shown = json.loads(reel(tmp_path, "cat-file", "-p", finding).stdout)
        assert shown["source"] == "payments API export" and shown["scope"] == "account 42, 2026-12-01"
        assert (
            "source: payments API export" in json.loads(reel(tmp_path, "ops", "show", op, "--json").stdout)["evidence"]
        )


def test_a_fresh_attempt_is_linked_and_needs_a_second_person(tmp_path: Path) -> None:
    with Target(tmp_path / "ledger.jsonl") as target:
        crashed_commit(tmp_path, target, "blind", "target-kills")
        (doc,) = json.loads(reel(tmp_path, "ops", "--unresolved", "--json").stdout)
        op = doc["op"]
        reel(tmp_path, "fork", "retry")
        pay = json.dumps({"method": "POST", "url": f"{target.url}/blind/pay", "json": {"amount": 5}})
        me = reel(
            tmp_path,
            "effect",
            "retry",
            "--adapter",
            "http",
            "--op",
            pay,
            "--supersedes",
            op,
            "--approved-by",
            doc["principal"],
        )
        assert me.returncode == 6 and b"other than its initiator" in me.stderr
        ok = reel(
            tmp_path,
            "--json",
            "effect",
            "retry",
            "--adapter",
            "http",
            "--op",
            pay,
            "--supersedes",
            op[:12],
            "--approved-by",
            "second-approver",
        )
        assert ok.returncode == 0, ok.stderr
        assert json.loads(ok.stdout)["supersedes"] == op
        reel(tmp_path, "commit", "retry")
        ops = {d["op"]: d for d in json.loads(reel(tmp_path, "ops", "--json").stdout)}
        (fresh,) = [d for d in ops.values() if d.get("supersedes") == op]
        assert fresh["op"] != op and fresh["approved_by"] == "second-approver"
        assert ops[op]["state"] == "unknown"  # the predecessor's uncertainty is not erased


def test_the_views_initiator_cannot_approve_a_fresh_attempt_another_person_queues(tmp_path: Path) -> None:
    """alice forks the view, bob queues the fresh attempt: alice's approval is her own initiative's, and
    refused (E009); bob's own too; a third person's is taken, and the effect names alice, whose view it is."""
    with Target(tmp_path / "ledger.jsonl") as target:
        crashed_commit(tmp_path, target, "blind", "target-kills")
        op = json.loads(reel(tmp_path, "ops", "--unresolved", "--json").stdout)[0]["op"]
        assert reel(tmp_path, "fork", "retry", REEL_PRINCIPAL="alice").returncode == 0
        pay = json.dumps({"method": "POST", "url": f"{target.url}/blind/pay", "json": {"amount": 5}})
        for approver in ("alice", "bob"):
            refused = reel(
                tmp_path,
                "effect",
                "retry",
                "--adapter",
                "http",
                "--op",
                pay,
                "--supersedes",
                op,
                "--approved-by",
                approver,
                REEL_PRINCIPAL="bob",
            )
            assert refused.returncode == 6 and b"E009" in refused.stderr
            assert b"other than its initiator" in refused.stderr
        ok = reel(
            tmp_path,
            "--json",
            "effect",
            "retry",
            "--adapter",
            "http",
            "--op",
            pay,
            "--supersedes",
            op,
            "--approved-by",
            "carol",
            REEL_PRINCIPAL="bob",
        )
        assert ok.returncode == 0, ok.stderr
        effect = json.loads(reel(tmp_path, "cat-file", "-p", json.loads(ok.stdout)["id"]).stdout)
        assert effect["principal"] == "alice" and effect["meta"]["approved_by"] == "carol"
        assert target.count("/") == 1


def test_the_specimens_fault_schedule_crash_after_200_restore_and_guarded_refusals(tmp_path: Path) -> None:
    """The AGI Reactor specimen, black-box: the payment reaches the target, the drainer dies after the
    target answered, the store is restored from a backup holding the UNKNOWN entry (the target is not
    rolled back), and every way of trying again under the hold, or around it, sends nothing new."""
    import shutil

    with Target(tmp_path / "ledger.jsonl") as target:
        crashed_commit(tmp_path, target, "blind", "target-kills")  # the target appended, then killed reel
        assert target.count("/") == 1  # "never send anything" cannot pass this test
        backup = tmp_path / "backup.reel"
        shutil.copytree(tmp_path / ".reel", backup)
        (doc,) = json.loads(reel(tmp_path, "ops", "--unresolved", "--json").stdout)
        op = doc["op"]
        shutil.rmtree(tmp_path / ".reel")  # lose the store; restore the backup, not the target
        shutil.copytree(backup, tmp_path / ".reel")
        assert reel(tmp_path, "hold", "--why", "restored from backup").returncode == 0

        pay = json.dumps({"method": "POST", "url": f"{target.url}/blind/pay", "json": {"amount": 5}})
        changed = json.dumps({"method": "POST", "url": f"{target.url}/blind/pay", "json": {"amount": 6}})
        assert reel(tmp_path, "recover").returncode == 6  # held: no drain at all
        reel(tmp_path, "fork", "again")
        for op_json in (pay, changed):  # the same operation again, or a changed intent: refused at admission
            refused = reel(tmp_path, "effect", "again", "--adapter", "http", "--op", op_json)
            assert refused.returncode == 6 and b"E012" in refused.stderr
        replacement = reel(
            tmp_path,
            "effect",
            "again",
            "--adapter",
            "http",
            "--op",
            pay,
            "--supersedes",
            op,
            "--approved-by",
            "second-approver",
        )
        assert replacement.returncode == 6 and b"E012" in replacement.stderr
        assert target.count("/") == 1

        assert reel(tmp_path, "release").returncode == 0
        assert reel(tmp_path, "recover").returncode == 7  # the guard, not the hold, keeps it from resending
        state = json.loads(reel(tmp_path, "ops", "show", op, "--json").stdout)
        assert state["state"] == "unknown" and "never resent" in state["why_unknown"]
        assert state["intent"].startswith("journaled")
        self_approved = reel(
            tmp_path,
            "effect",
            "again",
            "--adapter",
            "http",
            "--op",
            pay,
            "--supersedes",
            op,
            "--approved-by",
            doc["principal"],
        )
        assert self_approved.returncode == 6
        assert target.count("/") == 1  # exactly one effect after every recovery attempt
        assert json.loads(reel(tmp_path, "ops", "--unresolved", "--json").stdout)[0]["state"] == "unknown"


def test_ops_show_gives_the_request_with_secrets_hidden_and_the_findings_source(tmp_path: Path) -> None:
    token = "Bearer tok-7f3a9c1e5b"
    assert reel(tmp_path, "init").returncode == 0
    assert reel(tmp_path, "fork", "pay").returncode == 0
    op = {
        "method": "POST",
        "url": "http://127.0.0.1:9/pay?order=42",
        "headers": {"Authorization": token},
        "json": {"amount": 5, "echo": token, "Authorization": "literal", "items": [token]},
    }
    assert reel(tmp_path, "effect", "pay", "--adapter", "http", "--op", json.dumps(op)).returncode == 0
    assert reel(tmp_path, "commit", "pay").returncode == 9  # nothing listens on port 9: not sent
    (doc,) = json.loads(reel(tmp_path, "ops", "--json").stdout)
    settled = reel(
        tmp_path,
        "reconcile",
        doc["op"],
        "--outcome",
        "absent",
        "--evidence",
        "no charge",
        "--observer",
        "dan",
        "--source",
        "the processor's dashboard",
        "--scope",
        "order 42 only",
    )
    assert settled.returncode == 0, settled.stderr
    shown = json.loads(reel(tmp_path, "ops", "show", doc["op"], "--json").stdout)
    assert shown["request"] == {
        "adapter": "http",
        "method": "POST",
        "url": "http://127.0.0.1:9/pay?order=42",
        "headers": {"Authorization": "<secret>"},
        "body": {"amount": 5, "echo": "<secret>", "Authorization": "<secret>", "items": ["<secret>"]},
    }
    assert {k: shown["reconciliation"][k] for k in ("outcome", "observer", "source", "scope")} == {
        "outcome": "absent",
        "observer": "dan",
        "source": "the processor's dashboard",
        "scope": "order 42 only",
    }
    text = reel(tmp_path, "ops", "show", doc["op"]).stdout.decode()
    assert "request    POST http://127.0.0.1:9/pay?order=42\n" in text
    assert "source     the processor's dashboard\n" in text and "scope      order 42 only\n" in text
    assert '"amount": 5' in text and "tok-7f3a9c1e5b" not in text
