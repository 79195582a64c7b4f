"""The framework integrations, each run through its example under examples/ with the framework's own fake
or test model, against a real loopback ledger: a committed attempt sends each effect once (two tool calls
made at once both land), an abandoned or rejected one sends nothing, and a refused call reaches the
model as a tool result with its code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from target import Target
from test_examples import EXAMPLES, _run

FRAMEWORKS = ["langgraph_agent.py", "openai_agents_agent.py", "pydantic_ai_agent.py"]


def _ledger(target: Target) -> list[tuple[str, dict]]:
    rows = [json.loads(line) for line in target.ledger_path.read_text().splitlines()]
    return sorted((row["path"], json.loads(row["body"])) for row in rows)


@pytest.mark.parametrize("example", FRAMEWORKS)
def test_a_committed_attempt_sends_each_effect_once(tmp_path: Path, example: str) -> None:
    with Target(tmp_path / "ledger.jsonl") as target:
        out = _run(str(EXAMPLES / example), str(tmp_path / "s"), f"{target.url}/blind", "commit", cwd=tmp_path)
        assert "committed: ['succeeded', 'succeeded']" in out, out
        assert _ledger(target) == [
            ("/blind/notify", {"text": "refund sent"}),
            ("/blind/refunds", {"amount": 12.5, "customer": 7}),
        ]


@pytest.mark.parametrize("example", FRAMEWORKS)
def test_an_abandoned_attempt_sends_nothing(tmp_path: Path, example: str) -> None:
    with Target(tmp_path / "ledger.jsonl") as target:
        out = _run(str(EXAMPLES / example), str(tmp_path / "s"), f"{target.url}/blind", "abandon", cwd=tmp_path)
        assert "aborted (the customer withdrew the request): nothing sent" in out, out
        assert target.ledger_path.read_text() == ""


@pytest.mark.parametrize("example", FRAMEWORKS)
def test_a_refused_call_reaches_the_model_as_a_tool_result(tmp_path: Path, example: str) -> None:
    with Target(tmp_path / "ledger.jsonl") as target:
        out = _run(str(EXAMPLES / example), str(tmp_path / "s"), f"{target.url}/blind", "commit", cwd=tmp_path)
        refused = [line for line in out.splitlines() if line.startswith("tool ") and " answered: " in line]
        assert len(refused) == 1, out
        error = json.loads(refused[0].split(" answered: ", 1)[1])["error"]
        assert error["code"] == "E009" and "127.0.0.1:9/other" in error["message"]


def test_langgraph_holds_the_commit_for_approval(tmp_path: Path) -> None:
    with Target(tmp_path / "ledger.jsonl") as target:
        url = f"{target.url}/blind"
        out = _run(str(EXAMPLES / "langgraph_agent.py"), str(tmp_path / "a"), url, "reject", cwd=tmp_path)
        held = json.loads(next(line for line in out.splitlines() if line.startswith("held")).split(": ", 1)[1])
        assert sorted(held["pending"]) == [f"http:POST:{url}/notify", f"http:POST:{url}/refunds"]
        assert "aborted (not approved)" in out and target.ledger_path.read_text() == ""
        out = _run(str(EXAMPLES / "langgraph_agent.py"), str(tmp_path / "b"), url, "approve", cwd=tmp_path)
        assert "committed: ['succeeded', 'succeeded']" in out and len(_ledger(target)) == 2


def test_tool_calls_from_many_threads_all_land(tmp_path: Path) -> None:
    """Frameworks run a turn's tool calls in threads over one store; every call lands, none errs."""
    from concurrent.futures import ThreadPoolExecutor

    from reelstore import Store
    from reelstore.integrations import Attempt

    url = "http://127.0.0.1:9"
    with Attempt(
        Store.init(tmp_path / "s"), "a", caps=["read,write=n/", f"fire_c=http:POST:{url}/"], commit=False
    ) as attempt:
        tools = attempt.tools

        def both(i: int) -> list[str]:
            return [tools.queue_http("POST", f"{url}/{i}", {"i": i}), tools.write_file(f"n/{i}", "the same text")]

        with ThreadPoolExecutor(8) as pool:
            answers = [a for pair in pool.map(both, range(80)) for a in pair]
        assert [a for a in answers if "error" in json.loads(a)] == []
        status = json.loads(tools.status())
        assert len(status["pending"]) == 80 and len(status["changes"]) == 80


def test_errors_come_back_as_results_and_an_exception_aborts(tmp_path: Path) -> None:
    from reelstore import Store
    from reelstore.integrations import Attempt

    store = Store.init(tmp_path / "s")
    try:
        with Attempt(store, "a", caps=["read,write=notes/"]) as attempt:
            tools = attempt.tools
            assert json.loads(tools.write_file("secrets/x", "no"))["error"]["code"] == "E009"
            assert json.loads(tools.read_file("notes/none"))["error"]["code"] == "E001"
            assert json.loads(tools.queue_http("POST", "not a url"))["error"]["code"] == "E014"
            assert "id" in json.loads(tools.write_file("notes/x", "yes"))
            raise RuntimeError("the agent crashed")
    except RuntimeError:
        pass
    assert not attempt.view.live and attempt.result is None
    assert [v.name for v in store.views()] == []


def test_langgraph_approval_node_waits_for_recorded_approvals(tmp_path: Path) -> None:
    """Under an `approval = required` rule the interrupt names the effects id; once another principal
    approved exactly that (`reel approve`), resuming with "approve" commits and sends."""
    import os
    import subprocess
    import sys

    from langgraph.types import Command

    from reelstore import Store
    from reelstore.errors import ApprovalRequired
    from reelstore.integrations import Attempt
    from reelstore.integrations.langgraph import agent_graph

    sys.path.insert(0, str(EXAMPLES))
    from langgraph_agent import ScriptedModel, script

    with Target(tmp_path / "ledger.jsonl") as target:
        url = f"{target.url}/blind"
        store = Store.init(tmp_path / "s")
        store.repo.config.set("service.pay.match", f"http:POST:{url}")
        store.repo.config.set("service.pay.approval", "required")
        with Attempt(store, "a", caps=["read,write=notes/", f"fire_c=http:POST:{url}/"], commit=False) as attempt:
            graph = agent_graph(ScriptedModel(responses=script(url, give_up=False)), attempt, approve=True)
            config = {"configurable": {"thread_id": "1"}}
            held = graph.invoke({"messages": [("user", "refund customer 7")]}, config)["__interrupt__"][0].value
            assert held["effects"] and target.ledger_path.read_text() == ""
            env = {**os.environ, "REEL_PRINCIPAL": "bob"}
            approved = subprocess.run(
                [
                    str(Path(sys.executable).parent / "reel"),
                    "-C",
                    str(tmp_path / "s"),
                    "approve",
                    "a",
                    "--by",
                    "bob",
                    "--effects",
                    held["effects"],
                ],
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert approved.returncode == 0, approved.stderr
            graph.invoke(Command(resume="approve"), config)
        assert attempt.result is not None and len(_ledger(target)) == 2

        with (
            pytest.raises(ApprovalRequired),
            Attempt(store, "b", caps=[f"fire_c=http:POST:{url}/"], commit=False) as unapproved,
        ):
            graph = agent_graph(ScriptedModel(responses=script(url, give_up=False)), unapproved, approve=True)
            graph.invoke({"messages": [("user", "refund customer 7")]}, config := {"configurable": {"thread_id": "2"}})
            graph.invoke(Command(resume="approve"), config)
        assert not unapproved.view.live and len(_ledger(target)) == 2
