"""Two machines' directories on one shared Postgres store (a real server), `reel` as real processes and a
real loopback target: a commit drains its own record by the lease protocol; a commit SIGKILLed between
its intent and its outcome is finished from the other directory by `reel drain --worker` once its lease
runs out (keyed resent with the same key, queryable asked, blind parked unknown), and the other
directory's `reel ops`, `reel recover` and `reel reconcile` see and settle it."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from conftest import REEL
from target import Target, configure, pay_op

from reelstore.api import Store

LEASE = "0.5"


def reel(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if k not in ("REEL_DIR", "REEL_TEST_CRASH_AT")}
    full.update(env)
    return subprocess.run([REEL, *args], cwd=cwd, env=full, capture_output=True, timeout=60)


def machines(tmp_path: Path, url: str, target: Target, n: int = 2) -> list[Path]:
    """`n` directories on the store at `url`, each with the target's service rules and a short lease."""
    out = []
    for i in range(n):
        d = tmp_path / f"m{i}"
        done = reel(tmp_path, "init", str(d), "--backend", url)
        assert done.returncode == 0, done.stderr
        repo = Store.open(d).repo
        configure(repo.config, target.url)
        repo.config.set("drain.lease", LEASE)
        out.append(d)
    return out


def queue(d: Path, view: str, *ops: dict) -> None:
    assert reel(d, "fork", view).returncode == 0
    for op in ops:
        done = reel(d, "effect", view, "--adapter", "http", "--op", json.dumps(op))
        assert done.returncode == 0, done.stderr


def ops(d: Path, *flags: str) -> list[dict]:
    done = reel(d, "ops", "--json", *flags)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_commit_on_a_shared_store_drains_its_own_record(tmp_path: Path, pg_url: str) -> None:
    with Target(tmp_path / "ledger.jsonl") as target:
        one, two = machines(tmp_path, pg_url, target)
        queue(one, "pay", *(pay_op(target.url, tier, n) for n, tier in enumerate(("keyed", "queryable", "blind"))))
        done = reel(one, "commit", "pay", "--json")
        assert done.returncode == 0, done.stderr
        drain = json.loads(done.stdout)["drain"]
        assert [o["action"] for o in drain["outcomes"]] == ["sent"] * 3 and drain["complete"]
        assert target.count("/") == 3
        seen = ops(two)
        assert [(o["index"], o["state"]) for o in seen] == [(0, "succeeded"), (1, "succeeded"), (2, "succeeded")]
        assert ops(two, "--unresolved") == []
        worker = reel(two, "drain", "--worker", "--once", "--json")
        assert worker.returncode == 0 and json.loads(worker.stdout)["drained"] == [], "nothing left to send"


@pytest.mark.parametrize("tier", ["keyed", "queryable", "blind"])
def test_a_commit_killed_after_sending_is_finished_from_another_machine(tmp_path: Path, pg_url: str, tier: str) -> None:
    with Target(tmp_path / "ledger.jsonl") as target:
        one, two = machines(tmp_path, pg_url, target)
        queue(one, "pay", pay_op(target.url, tier, 7), pay_op(target.url, "keyed", 8))
        killed = reel(one, "commit", "pay", REEL_TEST_CRASH_AT="fleet:after-send")
        assert killed.returncode == -9
        assert target.count("/") == 1
        first, second = ops(two)
        assert (first["state"], second["state"]) == ("unknown", "pending"), "the intent is visible elsewhere"
        assert first["worker"].startswith("commit:"), "the killed commit held it"
        time.sleep(float(LEASE) + 0.1)
        worker = reel(two, "drain", "--worker", "--once", "--json")
        assert worker.returncode == 0, worker.stderr
        drained = json.loads(worker.stdout)["drained"]
        amounts = [json.loads(e["body"])["amount"] for e in target.ledger()]
        if tier == "blind":
            assert amounts == [7], "a blind effect is never resent, and what follows it waits"
            assert [(d["state"], d["action"]) for d in drained] == [("unknown", "halted")]
            doubt, waiting = ops(two, "--unresolved")
            assert doubt["state"] == "unknown" and doubt["op"] == first["op"] and "blind" in doubt["why_unknown"]
            assert waiting["state"] == "pending"
            assert doubt["leased"] is False and doubt["worker"], "who parked it, and no lease holds it now"
            assert "`reel drain --worker`" in waiting["next_action"]
            assert [o["op"] for o in ops(one, "--unresolved")] == [doubt["op"], waiting["op"]], "every machine sees it"
            rec = reel(one, "recover")
            assert rec.returncode == 7 and b"E011" in rec.stderr
            settle = reel(
                one,
                "reconcile",
                doubt["op"],
                "--outcome",
                "succeeded",
                "--evidence",
                "on the statement",
                "--observer",
                "ops-2",
            )
            assert settle.returncode == 0, settle.stderr
            rec = reel(two, "recover")
            assert rec.returncode == 0, rec.stderr
            assert sorted(json.loads(e["body"])["amount"] for e in target.ledger()) == [7, 8]
            shown = json.loads(reel(two, "ops", "show", doubt["op"], "--json").stdout)
            assert shown["state"] == "succeeded" and shown["reconciliation"]["observer"] == "ops-2"
        else:
            assert sorted(amounts) == [7, 8], f"the {tier} effect reached the target exactly once"
            action = "resent" if tier == "keyed" else "reconciled"
            assert [(d["state"], d["action"]) for d in drained] == [("succeeded", action), ("succeeded", "sent")]
            assert ops(one, "--unresolved") == []


def test_reel_drain_needs_worker_mode_and_a_shared_store(tmp_path: Path) -> None:
    Store.init(tmp_path)
    plain = reel(tmp_path, "drain", "--once")
    assert plain.returncode == 6 and b"E014" in plain.stderr and b"--worker" in plain.stderr
    alone = reel(tmp_path, "drain", "--worker", "--once")
    assert alone.returncode == 6 and b"E014" in alone.stderr and b"--backend postgresql://" in alone.stderr
    bad = reel(tmp_path, "drain", "--worker", "--lease", "soon")
    assert bad.returncode == 6 and b"--lease" in bad.stderr and b"Traceback" not in bad.stderr


def test_a_hold_made_on_one_machine_stops_every_machine(tmp_path: Path, pg_url: str) -> None:
    with Target(tmp_path / "ledger.jsonl") as target:
        one, two = machines(tmp_path, pg_url, target)
        Store.open(one).repo.config.set("drain.onCommit", "workers")
        queue(one, "pay", pay_op(target.url, "keyed", 1))
        assert reel(one, "commit", "pay").returncode == 0
        held = reel(two, "hold", "--why", "auditing payments")
        assert held.returncode == 0, held.stderr
        worker = reel(one, "drain", "--worker", "--once", "--json")
        assert worker.returncode == 0, worker.stderr
        assert json.loads(worker.stdout)["held"] == "auditing payments" and target.count("/") == 0
        assert reel(one, "fork", "more").returncode == 0
        refused = reel(one, "effect", "more", "--adapter", "http", "--op", json.dumps(pay_op(target.url, "keyed", 2)))
        assert refused.returncode == 6 and b"E012" in refused.stderr and b"auditing payments" in refused.stderr
        assert reel(one, "release").returncode == 0
        worker = reel(two, "drain", "--worker", "--once", "--json")
        assert [d["state"] for d in json.loads(worker.stdout)["drained"]] == ["succeeded"]
        assert target.count("/") == 1


def test_a_workers_pre_drain_hook_refuses_and_nothing_is_sent(tmp_path: Path, pg_url: str) -> None:
    with Target(tmp_path / "ledger.jsonl") as target:
        one, two = machines(tmp_path, pg_url, target)
        Store.open(one).repo.config.set("drain.onCommit", "workers")
        queue(one, "pay", pay_op(target.url, "keyed", 1))
        assert reel(one, "commit", "pay").returncode == 0
        hook = two / ".reel" / "hooks" / "pre-drain"
        hook.write_text('#!/bin/sh\necho "no sends during the audit of $REEL_OP" >&2\nexit 1\n')
        hook.chmod(0o755)
        refused = reel(two, "drain", "--worker", "--once")
        assert refused.returncode == 6 and b"E009" in refused.stderr and b"no sends during the audit" in refused.stderr
        assert target.count("/") == 0 and [o["state"] for o in ops(one)] == ["pending"]
        hook.unlink()
        time.sleep(float(LEASE) + 0.1)  # the refused row was given back for one lease
        worker = reel(two, "drain", "--worker", "--once", "--json")
        assert [d["action"] for d in json.loads(worker.stdout)["drained"]] == ["sent"] and target.count("/") == 1
