"""An LLM agent under `reel run`: the official `openai` SDK talks to a real HTTPS model server on
loopback (its own CA), plainly and streamed. Its model calls pass through (the model sees each once,
the first streamed event reaches the agent while the model still holds the rest), its refund is a
pending effect that reaches nobody, the calls are recorded with tokens and latency and without the
API key; a replay with the model server stopped answers them from the recording (zero model
requests), a changed prompt diverges with the diff of its messages, and `--live-models` against a
model that answers differently shows up in `reel diff` as the changed refund."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from conftest import HELPERS
from model_server import ModelServer

from reelstore import Store

AGENT = HELPERS / "llm_agent.py"
NODE_AGENT = HELPERS / "llm_agent.cjs"
NODE_MODULES = Path(__file__).resolve().parents[2] / ".venv" / "node" / "node_modules"
"""Where .ci/run installs undici (`npm install --prefix .venv/node undici@6`) for the Node agent."""
KEY = "sk-test-7f3a9c1e5b2d4f6a8c0e"


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with ModelServer(tmp_path / "model", amount=5, gate=tmp_path / "gate") as model:
        store = Store.init(tmp_path / "store")
        store.repo.config.set("http.trust", str(model.ca))
        store.repo.config.save()
        yield tmp_path, model


def _json(proc) -> dict:
    assert proc.stdout, proc.stderr.decode()
    return json.loads(proc.stdout)


def _objects_hold(store: Path, needle: bytes) -> list[str]:
    repo = Store.open(store).repo
    return [h.hex() for h in repo.objects if needle in repo.objects.get_raw(h)]


def test_agent_thinks_records_and_replays_offline(setup, reel) -> None:
    tmp, model = setup
    store = str(tmp / "store")
    gate = str(tmp / "gate")
    run = reel(
        "-C",
        store,
        "--json",
        "run",
        "--record",
        "--keep",
        "--view",
        "recorded",
        "--model",
        model.url,
        "--",
        sys.executable,
        str(AGENT),
        model.url,
        gate,
    )
    doc = _json(run)
    assert doc["status"] == 0 and doc["refused"] == [] and doc["blocked"] == [], (doc, run.stderr.decode())
    assert doc["decision"] == "keep"
    # The model saw each call once, with the agent's key; the refund reached nobody.
    seen = model.ledger()
    assert [e["path"] for e in seen] == ["/v1/chat/completions", "/v1/chat/completions"]
    assert all(e["headers"]["authorization"] == f"Bearer {KEY}" for e in seen)
    # The proxy relayed the stream as it came: the agent had the first event while the model held the rest.
    assert model.gated == [True]
    (refund,) = doc["effects"]
    assert refund["method"] == "POST" and refund["url"] == f"{model.url}/refund"
    effect = Store.open(tmp / "store").handle("recorded").status().effects[0]
    assert json.loads(effect.op["body"]) == {"customer": 42, "order": 7, "amount": 5, "checked": "REFUND 5"}
    calls = doc["model_calls"]
    assert [(c["model"], c["stream"], c["tokens_in"], c["tokens_out"]) for c in calls] == [
        ("tiny-1", False, 11, 2),
        ("tiny-1", True, 12, 3),
    ]
    assert all(c["latency_ms"] >= c["first_ms"] >= 0 for c in calls)

    shown = _json(reel("-C", store, "--json", "show", "recorded"))
    assert [c["fingerprint"] for c in shown["model_calls"]] == [c["fingerprint"] for c in calls]
    assert shown["model_total"] == {
        "calls": 2,
        "tokens_in": 23,
        "tokens_out": 5,
        "latency_ms": sum(c["latency_ms"] for c in calls),
    }
    text = reel("-C", store, "show", "recorded").stdout.decode()
    assert "openai tiny-1  tokens 11 in / 2 out" in text and "total: 2 calls, tokens 23 in / 5 out" in text
    assert _objects_hold(tmp / "store", KEY.encode()) == []

    # Replay with the model server gone: same pending refund, zero model requests.
    model.__exit__(None, None, None)
    (tmp / "gate").unlink()
    replayed = _json(
        reel(
            "-C",
            store,
            "--json",
            "replay",
            "recorded",
            "--keep",
            "--view",
            "replayed",
            "--",
            sys.executable,
            str(AGENT),
            model.url,
            gate,
        )
    )
    assert replayed["status"] == 0 and replayed["divergences"] == [] and replayed["refused"] == [], replayed
    assert replayed["passed"] == [] and len(model.ledger()) == 2
    same = _json(reel("-C", store, "--json", "diff", "recorded", "replayed"))
    assert [e["status"] for e in same["effects"]] == ["same"]

    # A changed prompt is a divergence naming the call, with the diff of its messages.
    changed = _json(
        reel(
            "-C",
            store,
            "--json",
            "replay",
            "recorded",
            "--abort",
            "--",
            sys.executable,
            str(AGENT),
            model.url,
            gate,
            "Customer 42 wants a refund for order 8.",
        )
    )
    assert changed["status"] != 0 and changed["decision"] == "abort"
    first = changed["divergences"][0]
    assert first["index"] == 0 and first["model"] == "tiny-1"
    assert '-        "content": "Customer 42 was charged twice for order 7. What should we refund?"' in first["diff"]
    assert '+        "content": "Customer 42 wants a refund for order 8."' in first["diff"]
    assert len(model.ledger()) == 2


def test_live_models_against_another_model_shows_the_changed_refund(setup, reel) -> None:
    tmp, model = setup
    store = str(tmp / "store")
    gate = str(tmp / "gate")
    assert (
        _json(
            reel(
                "-C",
                store,
                "--json",
                "run",
                "--record",
                "--keep",
                "--view",
                "recorded",
                "--model",
                model.url,
                "--",
                sys.executable,
                str(AGENT),
                model.url,
                gate,
            )
        )["status"]
        == 0
    )
    port = model.port
    model.__exit__(None, None, None)
    with ModelServer(tmp / "model2", amount=7, port=port) as other:
        store_obj = Store.open(tmp / "store")
        store_obj.repo.config.set("http.trust", str(other.ca))
        store_obj.repo.config.save()
        live = _json(
            reel(
                "-C",
                store,
                "--json",
                "replay",
                "--live-models",
                "--keep",
                "--view",
                "live",
                "recorded",
                "--",
                sys.executable,
                str(AGENT),
                other.url,
                gate,
            )
        )
        assert live["status"] == 0 and live["refused"] == [] and live["divergences"] == [], live
        assert [e["path"] for e in other.ledger()] == ["/v1/chat/completions", "/v1/chat/completions"]
    changed = _json(reel("-C", store, "--json", "diff", "recorded", "live"))
    (effect,) = changed["effects"]
    assert effect["status"] == "changed"
    removed = [ln for ln in effect["diff"].splitlines() if ln.startswith("-") and not ln.startswith("---")]
    added = [ln for ln in effect["diff"].splitlines() if ln.startswith("+") and not ln.startswith("+++")]
    assert len(removed) == len(added) == 1  # only the body changed: the amount, and what the model said
    assert '\\"amount\\": 5' in removed[0] and '\\"amount\\": 7' in added[0]


def test_without_model_a_local_model_call_stays_a_pending_effect(setup, reel) -> None:
    """Only declared model paths pass: undeclared, the same call is captured like any POST (the agent gets
    a 202 it cannot read as an answer), and nothing reaches the model server."""
    tmp, model = setup
    doc = _json(
        reel(
            "-C",
            str(tmp / "store"),
            "--json",
            "run",
            "--abort",
            "--",
            sys.executable,
            str(AGENT),
            model.url,
            str(tmp / "gate"),
        )
    )
    assert doc["status"] != 0 and model.ledger() == [] and doc["passed"] == []
    assert [(e["method"], e["url"]) for e in doc["effects"]] == [("POST", f"{model.url}/v1/chat/completions")]


def test_a_node_fetch_agent_thinks_and_replays_offline(setup, reel, monkeypatch: pytest.MonkeyPatch) -> None:
    """Node's own fetch, routed through the proxy by undici's ProxyAgent (Node 20's fetch ignores the
    proxy variables), trusting reel's CA through NODE_EXTRA_CA_CERTS."""
    assert (NODE_MODULES / "undici").is_dir(), "run `npm install --prefix .venv/node undici@6`, as .ci/run does"
    monkeypatch.setenv("NODE_PATH", str(NODE_MODULES))
    tmp, model = setup
    store, gate = str(tmp / "store"), str(tmp / "gate")
    doc = _json(
        reel(
            "-C",
            store,
            "--json",
            "run",
            "--record",
            "--keep",
            "--view",
            "node",
            "--model",
            model.url,
            "--",
            "node",
            str(NODE_AGENT),
            model.url,
            gate,
        )
    )
    assert doc["status"] == 0 and doc["refused"] == [] and doc["blocked"] == [], doc
    assert [e["path"] for e in model.ledger()] == ["/v1/chat/completions", "/v1/chat/completions"]
    assert model.gated == [True]
    assert [(e["method"], e["url"]) for e in doc["effects"]] == [("POST", f"{model.url}/refund")]
    assert [(c["stream"], c["tokens_out"]) for c in doc["model_calls"]] == [(False, 2), (True, 3)]
    model.__exit__(None, None, None)
    (tmp / "gate").unlink()
    replayed = _json(
        reel(
            "-C",
            store,
            "--json",
            "replay",
            "node",
            "--keep",
            "--view",
            "node-again",
            "--",
            "node",
            str(NODE_AGENT),
            model.url,
            gate,
        )
    )
    assert replayed["status"] == 0 and replayed["divergences"] == [] and len(model.ledger()) == 2, replayed
    same = _json(reel("-C", store, "--json", "diff", "node", "node-again"))
    assert [e["status"] for e in same["effects"]] == ["same"]


def test_a_configured_read_rule_with_a_suffix_passes_and_a_key_in_the_url_is_kept_nowhere(setup, reel) -> None:
    """Gemini's shape: the method follows the model's name in the path, the key rides in the query."""
    tmp, model = setup
    store = str(tmp / "store")
    for key, value in (("match", f"http:POST:{model.url}/"), ("suffix", ":generateContent"), ("class", "read")):
        reel("-C", store, "config", f"service.gem.{key}", value, check=True)
    secret = "AIzaSecret0123456789"
    url = f"{model.url}/v1beta/models/g-1:generateContent?key={secret}"
    doc = _json(
        reel(
            "-C",
            store,
            "--json",
            "run",
            "--record",
            "--abort",
            "--allow",
            f"127.0.0.1:{model.port}",
            "--",
            "curl",
            "-sS",
            "-H",
            "Content-Type: application/json",
            "-d",
            '{"contents": []}',
            url,
            f"{model.url}/v1beta/models/g-1:tuneModel",
        )
    )
    assert doc["status"] == 0 and doc["refused"] == [], doc
    assert [e["path"] for e in model.ledger()] == [f"/v1beta/models/g-1:generateContent?key={secret}"]
    assert [(e["method"], e["url"]) for e in doc["effects"]] == [("POST", f"{model.url}/v1beta/models/g-1:tuneModel")]
    assert [p["url"] for p in doc["passed"]] == [f"{model.url}/v1beta/models/g-1:generateContent?key=<secret>"]
    assert [(c["provider"], c["model"]) for c in doc["model_calls"]] == [("gemini", "g-1")]
    assert secret not in json.dumps(doc) and _objects_hold(tmp / "store", secret.encode()) == []


def test_an_anthropic_sdk_agent_thinks_and_replays_offline(setup, reel, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    tmp, model = setup
    store, gate = str(tmp / "store"), str(tmp / "gate")
    agent = str(HELPERS / "llm_agent_anthropic.py")
    doc = _json(
        reel(
            "-C",
            store,
            "--json",
            "run",
            "--record",
            "--keep",
            "--view",
            "claude",
            "--model",
            model.url,
            "--",
            sys.executable,
            agent,
            model.url,
            gate,
        )
    )
    assert doc["status"] == 0 and doc["refused"] == [], doc
    assert [e["path"] for e in model.ledger()] == ["/v1/messages", "/v1/messages"]
    # The SDK sends its key as X-Api-Key or as a bearer token, depending on its version: the model got it.
    assert all(
        KEY in (e["headers"].get("x-api-key", "") + e["headers"].get("authorization", "")) for e in model.ledger()
    )
    assert model.gated == [True]
    assert [(c["provider"], c["model"], c["stream"], c["tokens_in"], c["tokens_out"]) for c in doc["model_calls"]] == [
        ("anthropic", "tiny-a", False, 11, 2),
        ("anthropic", "tiny-a", True, 12, 3),
    ]
    assert _objects_hold(tmp / "store", KEY.encode()) == []
    model.__exit__(None, None, None)
    replayed = _json(
        reel(
            "-C",
            store,
            "--json",
            "replay",
            "claude",
            "--keep",
            "--view",
            "claude-again",
            "--",
            sys.executable,
            agent,
            model.url,
            gate,
        )
    )
    assert replayed["status"] == 0 and replayed["divergences"] == [] and len(model.ledger()) == 2, replayed
    same = _json(reel("-C", store, "--json", "diff", "claude", "claude-again"))
    assert [e["status"] for e in same["effects"]] == ["same"]


def test_a_bad_model_origin_is_e014_and_leaves_no_view(tmp_path: Path, reel) -> None:
    Store.init(tmp_path / "s")
    for sandbox in ([], ["--no-sandbox"]):
        proc = reel("-C", str(tmp_path / "s"), "run", "--abort", *sandbox, "--model", "127.0.0.1:8000", "--", "true")
        assert proc.returncode == 6 and "E014: --model wants an origin" in proc.stderr.decode()
        assert Store.open(tmp_path / "s").views() == []
