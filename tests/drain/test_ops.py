"""The operator surface end to end: an unknown blind payment, listed, shown, reconciled; hold/release."""

from __future__ import annotations

import json
from pathlib import Path

from crashed_drain import crashed_commit, reel
from target import Target, configure, pay_op

from reelstore.api import Store

FIELDS = (
    "op",
    "state",
    "trunk",
    "record",
    "effect",
    "index",
    "adapter",
    "resource",
    "delivery",
    "principal",
    "evidence",
    "evidence_time",
    "why_unknown",
    "next_action",
)


def test_killed_blind_effect_is_listed_unknown_then_reconciled(tmp_path: Path) -> None:
    with Target(tmp_path / "ledger.jsonl") as target:
        crashed_commit(tmp_path, target, "blind", "target-kills")
        out = reel(tmp_path, "ops", "--unresolved", "--json")
        assert out.returncode == 0, out.stderr
        (doc,) = json.loads(out.stdout)
        assert all(doc.get(f) not in (None, "") for f in FIELDS), doc
        assert doc["state"] == "unknown" and doc["delivery"] == "blind" and doc["adapter"] == "http"
        assert doc["resource"] == f"http:POST:{target.url}/blind/pay"
        assert "never resent" in doc["why_unknown"] and "reel reconcile" in doc["next_action"]
        shown = reel(tmp_path, "ops", "show", doc["op"][:10])
        assert shown.returncode == 0 and doc["op"].encode() in shown.stdout and b"journal" in shown.stdout

        bad = reel(tmp_path, "reconcile", doc["op"], "--outcome", "maybe", "--evidence", "x", "--observer", "me")
        assert bad.returncode == 2
        done = reel(
            tmp_path,
            "--json",
            "reconcile",
            doc["op"],
            "--outcome",
            "succeeded",
            "--evidence",
            "ledger line 1 shows the payment",
            "--observer",
            "alice",
        )
        assert done.returncode == 0, done.stderr
        finding = json.loads(done.stdout)["finding"]
        cat = reel(tmp_path, "cat-file", "-p", finding)
        assert b"alice" in cat.stdout and b"ledger line 1" in cat.stdout
        assert json.loads(reel(tmp_path, "ops", "--unresolved", "--json").stdout) == []
        after = json.loads(reel(tmp_path, "ops", "--json").stdout)[0]
        assert after["state"] == "succeeded" and after["finding"] == finding and "alice" in after["evidence"]
        assert reel(tmp_path, "recover").returncode == 0 and target.count("/") == 1
        again = reel(tmp_path, "reconcile", doc["op"], "--outcome", "absent", "--evidence", "x", "--observer", "b")
        assert again.returncode == 5


def test_absent_is_final_and_nothing_is_resent(tmp_path: Path) -> None:
    with Target(tmp_path / "ledger.jsonl") as target:
        crashed_commit(tmp_path, target, "blind", "before-send")
        (doc,) = json.loads(reel(tmp_path, "ops", "--unresolved", "--json").stdout)
        out = reel(
            tmp_path,
            "reconcile",
            doc["op"][3:12],
            "--outcome",
            "absent",
            "--evidence",
            "no such payment",
            "--observer",
            "bob",
        )
        assert out.returncode == 0, out.stderr
        assert reel(tmp_path, "recover").returncode == 0
        assert target.count("/") == 0
        assert json.loads(reel(tmp_path, "ops", "--json").stdout)[0]["state"] == "absent"


def test_dropped_connection_makes_commit_exit_7_and_halts_later_effects(tmp_path: Path) -> None:
    with Target(tmp_path / "ledger.jsonl") as target:
        store = Store.init(tmp_path)
        configure(store.repo.config, target.url)
        view = store.fork("pay")
        view.effect("http", pay_op(target.url, "blind", 1))
        view.effect("http", pay_op(target.url, "keyed", 2))
        target.fault = "drop-after-append"
        out = reel(tmp_path, "commit", "pay")
        assert out.returncode == 7, out.stderr
        assert b"E011" in out.stderr and b"reel ops show" in out.stderr
        assert target.count("/blind") == 1 and target.count("/keyed") == 0
        states = [o["state"] for o in json.loads(reel(tmp_path, "ops", "--json").stdout)]
        assert states == ["unknown", "pending"]


def test_hold_stops_admission_and_draining(tmp_path: Path) -> None:
    with Target(tmp_path / "ledger.jsonl") as target:
        store = Store.init(tmp_path)
        configure(store.repo.config, target.url)
        store.fork("pay").effect("http", pay_op(target.url, "keyed"))
        assert reel(tmp_path, "hold", "--why", "auditing payments").returncode == 0
        refused = reel(tmp_path, "effect", "pay", "--adapter", "http", "--op", json.dumps(pay_op(target.url, "keyed")))
        assert refused.returncode == 6 and b"E012" in refused.stderr and b"auditing payments" in refused.stderr
        assert reel(tmp_path, "commit", "pay").returncode == 6
        assert reel(tmp_path, "recover").returncode == 6
        assert target.count("/") == 0
        assert reel(tmp_path, "release").returncode == 0
        assert reel(tmp_path, "commit", "pay").returncode == 0
        assert target.count("/keyed") == 1


def test_unknown_op_names(tmp_path: Path) -> None:
    Store.init(tmp_path)
    assert reel(tmp_path, "ops", "show", "op_ffff").returncode == 4
    assert reel(tmp_path, "ops", "show", "f").returncode == 6
