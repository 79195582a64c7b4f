"""Drain workers on a shared outbox in a real PostgreSQL server, sending to a real loopback target whose
ledger is the oracle: claim order, one sender per effect, fencing of a stale worker, takeover of a
worker SIGKILLed between its intent and its outcome (by tier), and the commit notice waking an idle one."""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from pathlib import Path

import psycopg
import pytest
from fleet_rows import commit_rows, make_outbox, queue, spawn, states
from pg_server import PgServer
from target import Target, configure, pay_op

from reelstore.api import Store
from reelstore.errors import StaleEpoch
from reelstore.fleet import outbox
from reelstore.fleet.worker import Worker
from reelstore.objects import Hash

LEASE = 0.6


def record(n: int) -> Hash:
    return Hash.of(f"record {n}".encode())


def setup(tmp_path: Path, target: Target, url: str) -> Store:
    store = Store.init(tmp_path / "store")
    configure(store.repo.config, target.url)
    make_outbox(url, tmp_path / "schema")
    return store


def amounts(target: Target) -> Counter[int]:
    """How many times the target acted on each amount (each effect of a test has its own)."""
    return Counter(json.loads(e["body"])["amount"] for e in target.ledger())


def test_claims_follow_commit_order_and_each_records_positions(tmp_path: Path, pg_url: str) -> None:
    with Target(tmp_path / "ledger.jsonl") as target:
        store = setup(tmp_path, target, pg_url)
        a = queue(store, "a", [pay_op(target.url, "keyed", n) for n in (1, 2, 3)])
        b = queue(store, "b", [pay_op(target.url, "keyed", n) for n in (4, 5)])
        commit_rows(pg_url, record(1), a)
        commit_rows(pg_url, record(2), b)
        conn = outbox.connect(pg_url)
        first = outbox.claim(conn, "w1", 30)
        second = outbox.claim(conn, "w2", 30)
        assert first is not None and second is not None
        assert (first.op, first.position, first.epoch) == (a[0][0], 0, 1)
        assert (second.op, second.position) == (b[0][0], 0), "record 1's position 1 waits for its position 0"
        assert outbox.claim(conn, "w3", 30) is None, "both records' next positions wait on a leased row"
        outbox.settle(conn, first, "failed", {"note": "refused"})
        third = outbox.claim(conn, "w3", 30)
        assert third is not None and third.op == a[1][0], "a failed effect is settled: the next one goes"
        outbox.settle(conn, second, "unknown", {"note": "parked"})
        outbox.settle(conn, third, "succeeded", {})
        fourth = outbox.claim(conn, "w3", 30)
        assert fourth is not None and fourth.op == a[2][0]
        assert outbox.claim(conn, "w3", 30) is None, "an unknown outcome halts the rest of its record"


def test_two_workers_never_send_one_effect_twice(tmp_path: Path, pg_url: str) -> None:
    with Target(tmp_path / "ledger.jsonl") as target:
        store = setup(tmp_path, target, pg_url)
        n = 0
        for r in range(12):
            effects = queue(store, f"v{r}", [pay_op(target.url, "blind", n + i) for i in range(3)])
            commit_rows(pg_url, record(r), effects)
            n += 3
        procs = [spawn(tmp_path / "store", pg_url, f"w{i}", 30) for i in range(2)]
        reports = []
        for p in procs:
            out, err = p.communicate(timeout=60)
            assert p.returncode == 0, err.decode()
            reports.append(json.loads(out))
        assert amounts(target) == Counter(range(n)), "every blind effect reached the target exactly once"
        assert sum(len(r["drained"]) for r in reports) == n
        assert all(s == "done" for s, _ in states(pg_url).values())


def test_a_stale_worker_cannot_write_after_another_took_over(tmp_path: Path, pg_url: str) -> None:
    with Target(tmp_path / "ledger.jsonl") as target:
        store = setup(tmp_path, target, pg_url)
        commit_rows(pg_url, record(1), queue(store, "a", [pay_op(target.url, "keyed")]))
        conn = outbox.connect(pg_url)
        stale = outbox.claim(conn, "slow", 0.2)
        assert stale is not None
        assert outbox.claim(conn, "fast", 30) is None, "a live lease is not taken over"
        time.sleep(0.4)
        fresh = outbox.claim(conn, "fast", 30)
        assert fresh is not None and fresh.op == stale.op and fresh.epoch == stale.epoch + 1
        with pytest.raises(StaleEpoch) as caught:
            outbox.intent(conn, stale, 30, 1, "intent")
        assert "fast" in caught.value.message and caught.value.code == "E016"
        with pytest.raises(StaleEpoch):
            outbox.settle(conn, stale, "succeeded", {"note": "late"})
        outbox.intent(conn, fresh, 30, 1, "intent")
        outbox.settle(conn, fresh, "succeeded", {"note": "the live claim"})
        assert states(pg_url)[stale.op][1]["note"] == "the live claim"


def test_a_worker_whose_lease_was_taken_over_stops_and_says_so(tmp_path: Path, pg_url: str) -> None:
    with Target(tmp_path / "ledger.jsonl") as target:
        store = setup(tmp_path, target, pg_url)
        commit_rows(pg_url, record(1), queue(store, "a", [pay_op(target.url, "keyed")]))
        target.fault = "stall-after-append"
        with Worker(store.repo, pg_url, "slow", 0.3) as slow, Worker(store.repo, pg_url, "fast", 30) as fast:
            import threading

            caught: list[BaseException] = []

            def send() -> None:
                try:
                    slow.step()
                except BaseException as exc:  # noqa: BLE001
                    caught.append(exc)

            thread = threading.Thread(target=send)
            thread.start()
            assert target.stalled.wait(10)
            time.sleep(0.5)
            taken = fast.step()
            target.unstall.set()
            thread.join(10)
        assert taken is not None and taken.outcome.action == "resent" and taken.outcome.state == "succeeded"
        assert len(caught) == 1 and isinstance(caught[0], StaleEpoch), caught
        assert target.count("/keyed") == 1, "the keyed target deduplicated the takeover's resend"


TAKEOVER = {  # tier, crash point -> (times on the ledger, state after the takeover, action)
    ("keyed", "before-send"): (1, "done", "resent"),
    ("keyed", "after-send"): (1, "done", "resent"),
    ("queryable", "before-send"): (1, "done", "resent"),
    ("queryable", "after-send"): (1, "done", "reconciled"),
    ("blind", "before-send"): (0, "unknown", "halted"),
    ("blind", "after-send"): (1, "unknown", "halted"),
}


@pytest.mark.parametrize(("tier", "point"), sorted(TAKEOVER))
def test_a_worker_killed_between_intent_and_outcome_is_taken_over(
    tmp_path: Path, pg_url: str, tier: str, point: str
) -> None:
    with Target(tmp_path / "ledger.jsonl") as target:
        store = setup(tmp_path, target, pg_url)
        (effect,) = queue(store, "a", [pay_op(target.url, tier)])
        commit_rows(pg_url, record(1), [effect])
        env = {**os.environ, "REEL_TEST_CRASH_AT": "fleet:" + point}
        victim = spawn(tmp_path / "store", pg_url, "victim", LEASE, env=env)
        victim.communicate(timeout=60)
        assert victim.returncode == -9
        assert states(pg_url)[effect[0]][0] == "intent"
        assert target.count("/") == (0 if point == "before-send" else 1)
        started = time.monotonic()
        heir = spawn(tmp_path / "store", pg_url, "heir", 30)
        out, err = heir.communicate(timeout=60)
        assert heir.returncode == 0, err.decode()
        report = json.loads(out)
        if not report["drained"]:  # the victim's lease had not run out yet: the heir comes back once it has
            time.sleep(LEASE)
            heir = spawn(tmp_path / "store", pg_url, "heir", 30)
            out, _ = heir.communicate(timeout=60)
            report = json.loads(out)
        assert time.monotonic() - started < LEASE + 30
        times, state, action = TAKEOVER[(tier, point)]
        assert target.count("/") == times, target.answers
        assert states(pg_url)[effect[0]][0] == state
        (drained,) = report["drained"]
        assert drained["action"] == action and drained["op"] == effect[0]
        if tier == "keyed":
            assert {e["key"] for e in target.ledger()} == {effect[0]}, "resent with the same key"


def test_a_commit_notice_wakes_an_idle_worker(tmp_path: Path, pg_url: str) -> None:
    with Target(tmp_path / "ledger.jsonl") as target:
        store = setup(tmp_path, target, pg_url)
        worker = spawn(tmp_path / "store", pg_url, "idle", 60, once=False)
        try:
            with psycopg.connect(pg_url, autocommit=True) as conn:
                for _ in range(200):
                    listening = conn.execute(
                        "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'LISTEN%%' AND state = 'idle'"
                    ).fetchone()
                    if listening is not None and listening[0] == 1:
                        break
                    time.sleep(0.05)
                else:
                    pytest.fail("the worker never listened")
            time.sleep(0.3)  # its first round found nothing; it now sleeps for a lease of 60 s
            commit_rows(pg_url, record(1), queue(store, "a", [pay_op(target.url, "keyed")]))
            for _ in range(200):
                if target.count("/keyed") == 1:
                    break
                time.sleep(0.05)
            assert target.count("/keyed") == 1, "the notice woke the worker long before its 60 s poll"
        finally:
            worker.kill()
            worker.communicate(timeout=30)


def test_a_worker_rides_out_a_database_restart(tmp_path: Path, pg_server: PgServer) -> None:
    url = pg_server.fresh_url()
    with Target(tmp_path / "ledger.jsonl") as target:
        store = setup(tmp_path, target, url)
        worker = spawn(tmp_path / "store", url, "steady", 1, once=False)
        try:
            commit_rows(url, record(1), queue(store, "a", [pay_op(target.url, "keyed", 1)]))
            for _ in range(200):
                if target.count("/keyed") == 1:
                    break
                time.sleep(0.05)
            pg_server.restart("immediate")
            commit_rows(url, record(2), queue(store, "b", [pay_op(target.url, "keyed", 2)]))
            for _ in range(300):
                if target.count("/keyed") == 2:
                    break
                time.sleep(0.05)
            assert worker.poll() is None, "the worker is still running"
            assert amounts(target) == Counter([1, 2]), "the same worker sent the effect committed after the restart"
        finally:
            worker.kill()
            worker.communicate(timeout=30)
