"""Record, replay and diff a dry run: a script GETs HTTPS resources and POSTs what it read;
its run is recorded, the target is stopped, and the replay reproduces the same effects with no network;
a changed script's extra read is a reported divergence; `reel diff` shows exactly the changed effect."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from tls_target import TlsTarget

from reelstore import Store

SCRIPT = """
import json, sys, urllib.request
base, extra = sys.argv[1], sys.argv[2:]
a = urllib.request.urlopen(base + "/price/a").read().decode()
b = urllib.request.urlopen(base + "/price/b").read().decode()
more = [urllib.request.urlopen(base + "/price/" + x).read().decode() for x in extra]
body = json.dumps({"seen": [a, b, *more]}).encode()
req = urllib.request.Request(base + "/order", data=body, headers={"Content-Type": "application/json"}, method="POST")
urllib.request.urlopen(req).read()
"""


@pytest.fixture
def setup(tmp_path: Path):
    with TlsTarget(tmp_path / "target") as target:
        store = Store.init(tmp_path / "store")
        store.repo.config.set("http.trust", str(target.ca))
        store.repo.config.save()
        script = tmp_path / "agent.py"
        script.write_text(SCRIPT)
        yield tmp_path / "store", target, script


def _json(proc) -> dict:
    assert proc.stdout, proc.stderr.decode()
    return json.loads(proc.stdout)


def test_record_replay_offline_and_diff(setup, reel) -> None:
    store, target, script = setup
    url = f"https://127.0.0.1:{target.port}"
    recorded = _json(
        reel(
            "-C",
            str(store),
            "--json",
            "run",
            "--record",
            "--keep",
            "--view",
            "recorded",
            "--allow",
            f"127.0.0.1:{target.port}",
            "--",
            sys.executable,
            str(script),
            url,
        )
    )
    assert recorded["status"] == 0 and recorded["decision"] == "keep", recorded
    assert [p["url"] for p in recorded["passed"]] == [f"{url}/price/a", f"{url}/price/b"]
    reads = _json(reel("-C", str(store), "--json", "show", "recorded"))["recorded_reads"]
    assert [(r["method"], r["url"], r["status"]) for r in reads] == [
        ("GET", f"{url}/price/a", 200),
        ("GET", f"{url}/price/b", 200),
    ]
    seen = len(target.ledger())
    target.__exit__(None, None, None)  # the target is gone: a replay that touched the network would fail

    replayed = _json(
        reel(
            "-C",
            str(store),
            "--json",
            "replay",
            "--keep",
            "--view",
            "replayed",
            "recorded",
            "--",
            sys.executable,
            str(script),
            url,
        )
    )
    assert replayed["status"] == 0 and replayed["divergences"] == [] and replayed["refused"] == [], replayed
    assert replayed["passed"] == [] and len(target.ledger()) == seen
    same = _json(reel("-C", str(store), "--json", "diff", "recorded", "replayed"))
    assert same["names"] == [] and [e["status"] for e in same["effects"]] == ["same"]
    assert same["effects"][0]["a"]["op"]["body"] == same["effects"][0]["b"]["op"]["body"]

    diverged = reel(
        "-C",
        str(store),
        "--json",
        "replay",
        "--keep",
        "--view",
        "changed",
        "recorded",
        "--",
        sys.executable,
        str(script),
        url,
        "c",
    )
    doc = _json(diverged)
    assert doc["status"] != 0 and doc["decision"] == "abort"
    (d,) = doc["divergences"]
    assert d["index"] == 2 and d["url"] == f"{url}/price/c" and d["expected"] is None
    assert d["nearest"]["url"].startswith(f"{url}/price/")
    assert any("diverged at read 2" in r["message"] for r in doc["refused"])


def test_diff_aligns_effects_and_shows_the_changed_body(tmp_path: Path, reel) -> None:
    store = Store.init(tmp_path)
    a, b = store.fork("a"), store.fork("b")
    for v, amount in ((a, 5), (b, 7)):
        v.effect("http", {"method": "POST", "url": "https://example.invalid/pay", "json": {"amount": amount}})
    b.effect("http", {"method": "POST", "url": "https://example.invalid/notify", "json": {}})
    b.put("notes/x", "only in b")
    doc = _json(reel("--json", "diff", "a", "b"))
    assert [(e["status"], (e["b"] or e["a"])["resource"]) for e in doc["effects"]] == [
        ("changed", "http:POST:https://example.invalid/pay"),
        ("added", "http:POST:https://example.invalid/notify"),
    ]
    assert '-  "amount": 5' in doc["effects"][0]["diff"] and '+  "amount": 7' in doc["effects"][0]["diff"]
    assert doc["names"] == [{"status": "added", "name": "notes/x", "a": None, "b": doc["names"][0]["b"]}]
    text = reel("diff", "a", "b").stdout.decode()
    assert "changed" in text and "added" in text and '+  "amount": 7' in text


def test_options_may_follow_source_when_dashdash_ends_them(setup, reel) -> None:
    store, target, script = setup
    url = f"https://127.0.0.1:{target.port}"
    assert (
        _json(
            reel(
                "-C",
                str(store),
                "--json",
                "run",
                "--record",
                "--keep",
                "--view",
                "recorded",
                "--allow",
                f"127.0.0.1:{target.port}",
                "--",
                sys.executable,
                str(script),
                url,
            )
        )["status"]
        == 0
    )
    doc = _json(
        reel(
            "-C",
            str(store),
            "--json",
            "replay",
            "recorded",
            "--view",
            "late",
            "--abort",
            "--",
            sys.executable,
            str(script),
            url,
        )
    )
    assert doc["view"] == "late" and doc["status"] == 0 and doc["decision"] == "abort", doc
    # When CMD follows SOURCE without `--`, a later `--` and the options around it are the command's.
    words = reel(
        "-C",
        str(store),
        "replay",
        "--abort",
        "recorded",
        sys.executable,
        "-c",
        "import sys; print(sys.argv[1:])",
        "--view",
        "x",
        "--",
        "y",
    )
    assert "['--view', 'x', '--', 'y']" in words.stdout.decode()
    assert [v.name for v in Store.open(store).views()] == ["recorded"]
