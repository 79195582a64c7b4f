"""`reel mcp` as agents meet it, through the official MCP client: an owed effect is a result (not an
error a model retries), tools say what they do and return, ops are strict, one budget bounds the whole
server, `--propose-only` leaves the commit to a person, and one session's slow drain blocks no other."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
from conftest import REEL
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from target import Target
from test_mcp import until_listening

from reelstore.backend.repo import Repo

TOKEN = "session-test-token-42"
READS = {"ls", "get", "diff", "status", "views", "log", "ops", "operation", "capabilities"}


def _text(result) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


def _doc(result):
    assert not result.isError, _text(result)
    doc = result.structuredContent
    assert doc is not None
    return doc.get("result", doc) if set(doc) == {"result"} else doc


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("REEL_DIR", "REEL_PRINCIPAL")}
    env["REEL_MCP_TOKEN"] = TOKEN
    return {**env, **extra}


def _store(tmp_path: Path) -> Path:
    store = tmp_path / "store"
    store.mkdir()
    Repo.init(store)
    return store


@asynccontextmanager
async def _stdio(store: Path, *args: str, principal: str = "") -> AsyncIterator[tuple[ClientSession, str]]:
    env = _env(REEL_PRINCIPAL=principal) if principal else _env()
    params = StdioServerParameters(command=REEL, args=["-C", str(store), "mcp", *args], env=env)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
        init = await client.initialize()
        yield client, init.instructions or ""


@asynccontextmanager
async def _http_server(store: Path, port: int, *args: str) -> AsyncIterator[str]:
    server = subprocess.Popen(
        [REEL, "-C", str(store), "mcp", *args, "--http", str(port)],
        env=_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        await until_listening(server, port)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.send_signal(signal.SIGINT)
        try:
            server.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.communicate()


@asynccontextmanager
async def _http_session(url: str) -> AsyncIterator[ClientSession]:
    authed = httpx.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=httpx.Timeout(30, read=120))
    async with (
        authed,
        streamable_http_client(url, http_client=authed) as (read, write, _),
        ClientSession(read, write) as client,
    ):
        await client.initialize()
        yield client


def _reel(store: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([REEL, "-C", str(store), *args], capture_output=True, env=_env(), timeout=120)


def test_an_owed_refund_is_a_result_and_a_retrying_agent_sends_it_once(
    tmp_path: Path, reserve_port: Callable[[], int]
) -> None:
    """The agent retries whatever comes back as a tool error, as models do. The target is down at commit:
    the refund is owed (not sent). The agent must see a result, not an error, so it queues no second
    refund; the operator's `reel recover` then sends the one refund to the blind ledger."""
    store = _store(tmp_path)
    port = reserve_port()
    base = f"http://127.0.0.1:{port}"
    op = {"method": "POST", "url": f"{base}/blind/refund", "json": {"ticket": 42, "amount": 12.5}}

    async def agent() -> tuple[dict, str]:
        async with _stdio(store, "--cap", f"fire_c=http:POST:{base}/blind/") as (client, _):
            for attempt in range(3):
                view = f"refund-{attempt}"
                _doc(await client.call_tool("fork", {"name": view}))
                _doc(await client.call_tool("effect", {"view": view, "adapter": "http", "op": op}))
                result = await client.call_tool("commit", {"view": view})
                if not result.isError:
                    break
            report = _doc(result)
            assert report["committed"] and report["state"] == "owed" and report["do_not_queue_again"]
            (owed,) = report["operations"]
            assert owed["state"] == "not_sent" and owed["owed"] and "reel recover" in owed["settled_by"]
            asked = _doc(await client.call_tool("operation", {"op": owed["op"]}))
            assert asked["state"] == "not_sent" and asked["owed"]
            return report, owed["op"]

    report, op_id = asyncio.run(asyncio.wait_for(agent(), timeout=120))
    assert report["view"] == "refund-0"  # the agent did not retry
    with Target(tmp_path / "ledger.jsonl", port=port) as target:
        recovered = _reel(store, "recover")
        assert recovered.returncode == 0, recovered.stderr.decode()
        assert [json.loads(e["body"]) for e in target.ledger()] == [{"amount": 12.5, "ticket": 42}]

        async def ask() -> dict:
            async with _stdio(store) as (client, _):
                return _doc(await client.call_tool("operation", {"op": op_id}))

        settled = asyncio.run(asyncio.wait_for(ask(), timeout=60))
        assert settled["state"] == "succeeded" and not settled["owed"] and settled["settled_by"] == ""
        assert len(target.ledger()) == 1


def _described(schema: dict, where: str) -> list[str]:
    """Every property (here and in $defs) that has no description."""
    missing = []
    for name, prop in (schema.get("properties") or {}).items():
        if not prop.get("description"):
            missing.append(f"{where}.{name}")
    for name, sub in (schema.get("$defs") or {}).items():
        missing += _described(sub, f"{where}.$defs.{name}")
    return missing


def test_tools_are_annotated_typed_and_strict(tmp_path: Path) -> None:
    store = _store(tmp_path)
    url = "http://127.0.0.1:9"

    async def session() -> None:
        async with _stdio(
            store,
            "--cap",
            "read,write=notes/",
            "--cap",
            f"fire_c=http:POST:{url}/;budget=3",
            "--cap",
            "fire_c=fs:out/",
            "--session-budget",
            "5",
        ) as (client, instructions):
            # the model is told its capabilities
            assert f"fire_c=http:POST:{url}/;budget=3" in instructions and "at most 5 effects" in instructions
            told = _doc(await client.call_tool("capabilities", {}))
            assert told["session_budget"] == 5 and told["session_used"] == 0 and not told["propose_only"]
            tools = {t.name: t for t in (await client.list_tools()).tools}
            for name, t in tools.items():
                assert t.outputSchema is not None, name
                assert t.annotations is not None, name
                assert t.annotations.readOnlyHint is (name in READS), name
                assert not _described(t.inputSchema, name), _described(t.inputSchema, name)
                assert t.inputSchema["additionalProperties"] is False, name
            assert tools["commit"].annotations.destructiveHint and tools["effect"].annotations.destructiveHint
            op_schema = tools["effect"].inputSchema
            for kind in ("HttpOp", "FsOp"):
                assert op_schema["$defs"][kind]["additionalProperties"] is False

            _doc(await client.call_tool("fork", {"name": "v"}))
            typo = {"method": "POST", "url": f"{url}/pay", "jsn": {"amount": 5}}
            refused = await client.call_tool("effect", {"view": "v", "adapter": "http", "op": typo})
            assert refused.isError and "jsn" in _text(refused), _text(refused)
            assert _doc(await client.call_tool("status", {"view": "v"}))["effects"] == []
            op = {"method": "POST", "url": f"{url}/pay", "json": {"amount": 5}}
            misspelt = await client.call_tool("effect", {"view": "v", "adapter": "http", "op": op, "effect_clas": "B"})
            assert misspelt.isError and "effect_clas" in _text(misspelt), _text(misspelt)
            assert _doc(await client.call_tool("status", {"view": "v"}))["effects"] == []
            fs_typo = {"action": "write", "path": "out/a.txt", "contnet": "x"}
            refused = await client.call_tool("effect", {"view": "v", "adapter": "fs", "op": fs_typo})
            assert refused.isError and "contnet" in _text(refused), _text(refused)
            fs_op = {"action": "write", "path": "out/a.txt", "content": "x", "mode": None}
            queued = _doc(await client.call_tool("effect", {"view": "v", "adapter": "fs", "op": fs_op}))
            assert queued["resource"] == "fs:out/a.txt"
            wrong = await client.call_tool("effect", {"view": "v", "adapter": "http", "op": fs_op})
            assert wrong.isError and "E014: " in _text(wrong), _text(wrong)

    asyncio.run(asyncio.wait_for(session(), timeout=120))


def test_a_session_budget_bounds_the_whole_server(tmp_path: Path) -> None:
    """Each view may send 2 (its cap's budget), the server 2 in all: 4 views of 2 refunds send 2."""
    store = _store(tmp_path)
    with Target(tmp_path / "ledger.jsonl") as target:
        op = {"method": "POST", "url": f"{target.url}/blind/refund", "json": {"amount": 1}}

        async def session() -> list:
            async with _stdio(
                store, "--cap", f"fire_c=http:POST:{target.url}/blind/;budget=2", "--session-budget", "2"
            ) as (client, _):
                for i in range(4):
                    _doc(await client.call_tool("fork", {"name": f"v{i}"}))
                    for _ in range(2):
                        _doc(await client.call_tool("effect", {"view": f"v{i}", "adapter": "http", "op": op}))
                results = [await client.call_tool("commit", {"view": f"v{i}"}) for i in range(4)]
                # the budget is spent: a new effect could never be committed, so it is refused at once
                _doc(await client.call_tool("fork", {"name": "late"}))
                late = await client.call_tool("effect", {"view": "late", "adapter": "http", "op": op})
                assert late.isError and "E013: " in _text(late), _text(late)
                told = _doc(await client.call_tool("capabilities", {}))
                assert told["session_used"] == 2 and told["session_budget"] == 2
                _doc(await client.call_tool("abort", {"view": "late"}))
                return results

        results = asyncio.run(asyncio.wait_for(session(), timeout=120))
        assert _doc(results[0])["state"] == "done"
        for r in results[1:]:
            assert r.isError and "E013: " in _text(r), _text(r)
        assert len(target.ledger()) == 2
    listed = _reel(store, "views")
    assert sorted(line.split("\t")[0] for line in listed.stdout.decode().splitlines()) == ["v1", "v2", "v3"]


def test_propose_only_leaves_the_commit_to_a_person(tmp_path: Path) -> None:
    """The agent (principal `agent`) cannot commit; its view waits for an approval the rule requires;
    a person approves it and another commits it from the command line: one request."""
    store = _store(tmp_path)
    with Target(tmp_path / "ledger.jsonl") as target:
        rule = (("service.pay.match", f"http:POST:{target.url}/blind"), ("service.pay.approval", "required"))
        for key, value in rule:
            assert _reel(store, "config", key, value).returncode == 0
        op = {"method": "POST", "url": f"{target.url}/blind/refund", "json": {"amount": 3}}

        async def session() -> dict:
            async with _stdio(store, "--propose-only", principal="agent") as (client, instructions):
                assert "You cannot commit" in instructions
                names = {t.name for t in (await client.list_tools()).tools}
                assert "commit" not in names and "propose" in names
                assert (await client.call_tool("commit", {"view": "p"})).isError
                _doc(await client.call_tool("fork", {"name": "p"}))
                _doc(await client.call_tool("effect", {"view": "p", "adapter": "http", "op": op}))
                return _doc(await client.call_tool("propose", {"view": "p"}))

        proposed = asyncio.run(asyncio.wait_for(session(), timeout=120))
        assert proposed["state"] == "proposed" and proposed["effects"] == 1
        assert "reel commit p" in proposed["next_action"]
        assert target.ledger() == []
        unapproved = _reel(store, "commit", "p")
        assert unapproved.returncode == 10 and b"E018" in unapproved.stderr, unapproved.stderr.decode()
        assert _reel(store, "approve", "p", "--by", "agent").returncode == 6  # the proposer cannot approve
        approved = _reel(store, "approve", "p", "--by", "alice")
        assert approved.returncode == 0, approved.stderr.decode()
        done = _reel(store, "commit", "p")
        assert done.returncode == 0, done.stderr.decode()
        assert len(target.ledger()) == 1


def test_a_slow_drain_blocks_no_other_session(tmp_path: Path, reserve_port: Callable[[], int]) -> None:
    store = _store(tmp_path)
    with Target(tmp_path / "ledger.jsonl") as target:
        target.fault, target.fault_routes = "stall-after-append", ("/blind",)
        op = {"method": "POST", "url": f"{target.url}/blind/refund", "json": {"amount": 7}}

        async def run() -> None:
            async with _http_server(store, reserve_port()) as url, _http_session(url) as a, _http_session(url) as b:
                _doc(await a.call_tool("fork", {"name": "slow"}))
                _doc(await a.call_tool("effect", {"view": "slow", "adapter": "http", "op": op}))
                _doc(await b.call_tool("fork", {"name": "other"}))
                commit = asyncio.ensure_future(a.call_tool("commit", {"view": "slow"}))
                for _ in range(600):
                    if target.stalled.is_set():
                        break
                    await asyncio.sleep(0.05)
                assert target.stalled.is_set(), "the slow commit never reached the target"
                # while session a's drain waits on the target, session b is served
                status = _doc(await asyncio.wait_for(b.call_tool("status", {"view": "other"}), timeout=20))
                put = await asyncio.wait_for(b.call_tool("fork", {"name": "third"}), timeout=20)
                assert status["effects"] == [] and not put.isError and not commit.done()
                target.unstall.set()
                assert _doc(await asyncio.wait_for(commit, timeout=60))["state"] == "done"

        asyncio.run(asyncio.wait_for(run(), timeout=150))
        assert len(target.ledger()) == 1


def test_a_restarted_agent_cannot_queue_its_task_again(tmp_path: Path) -> None:
    """The effect tool's `key` names the task: after a restart (a new server), the same task queued in a
    new view is refused at admission, so the blind ledger sees one refund."""
    store = _store(tmp_path)
    with Target(tmp_path / "ledger.jsonl") as target:
        op = {"method": "POST", "url": f"{target.url}/blind/refund", "json": {"ticket": 42}}

        async def attempt(view: str) -> tuple[object, object]:
            async with _stdio(store) as (client, _):
                _doc(await client.call_tool("fork", {"name": view}))
                queued = await client.call_tool(
                    "effect", {"view": view, "adapter": "http", "op": op, "key": "refund:ticket-42"}
                )
                if queued.isError:
                    return queued, None
                return queued, await client.call_tool("commit", {"view": view})

        queued, committed = asyncio.run(asyncio.wait_for(attempt("first"), timeout=60))
        assert _doc(queued)["key"] == "refund:ticket-42" and _doc(committed)["state"] == "done"
        again, _ = asyncio.run(asyncio.wait_for(attempt("after-restart"), timeout=60))
        assert again.isError and "refund:ticket-42" in _text(again), _text(again)
        assert len(target.ledger()) == 1
