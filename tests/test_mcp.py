"""`reel mcp` driven by the official MCP client over stdio, against a real store and a loopback ledger."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

from conftest import REEL
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from target import Target

from reelstore.storage.repo import Repo

TOOLS = {"fork", "ls", "get", "put", "rm", "diff", "status", "effect", "commit", "abort", "views", "log", "ops"}


def _text(result) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


def _doc(result):
    assert not result.isError, _text(result)
    if result.structuredContent is not None:
        return result.structuredContent.get("result", result.structuredContent)
    return json.loads(_text(result))


async def _session(store: Path, url: str, ledger_lines) -> None:
    params = StdioServerParameters(
        command=REEL, args=["-C", str(store), "mcp", "--cap", "read,write,delete=notes/",
                            "--cap", f"fire_c=http:POST:{url}/blind/;budget=5"],
        env={k: v for k, v in os.environ.items() if k != "REEL_DIR"})
    async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
        await client.initialize()
        listed = await client.list_tools()
        names = {t.name for t in listed.tools}
        assert names == TOOLS
        schema = next(t for t in listed.tools if t.name == "put").inputSchema
        assert schema["required"] == ["view", "files"]

        wide = await client.call_tool("fork", {"name": "w", "caps": ["read,write="]})
        assert wide.isError and "E009: " in _text(wide)

        _doc(await client.call_tool("fork", {"name": "a"}))
        _doc(await client.call_tool("put", {"view": "a", "files": [
            {"path": "notes/plan.md", "text": "refund 42\n"}, {"path": "notes/raw.bin", "base64": "AAEC"}]}))
        got = _doc(await client.call_tool("get", {"view": "a", "path": "notes/plan.md"}))
        assert got["text"] == "refund 42\n"
        outside = await client.call_tool("put", {"view": "a", "files": [{"path": "secrets.txt", "text": "x"}]})
        assert outside.isError and "E009: " in _text(outside)
        op = {"method": "POST", "url": f"{url}/blind/refund", "json": {"order": 42}}
        _doc(await client.call_tool("effect", {"view": "a", "adapter": "http", "op": op}))
        _doc(await client.call_tool("abort", {"view": "a"}))
        assert ledger_lines() == []

        _doc(await client.call_tool("fork", {"name": "b"}))
        _doc(await client.call_tool("effect", {"view": "b", "adapter": "http", "op": op}))
        committed = _doc(await client.call_tool("commit", {"view": "b"}))
        assert committed["record"] and [e["state"] for e in committed["drain"]["outcomes"]] == ["succeeded"]
        assert len(ledger_lines()) == 1

        # a view forked outside the server with the trunk's full authority is out of the agent's reach
        foreign = await client.call_tool("commit", {"view": "wide"})
        assert foreign.isError and "E009: " in _text(foreign)
        assert [v["name"] for v in _doc(await client.call_tool("views", {}))] == []


def test_mcp_server_through_the_official_client(tmp_path: Path, reel) -> None:
    store = tmp_path / "store"
    store.mkdir()
    Repo.init(store)
    reel("-C", str(store), "fork", "wide", check=True)
    with Target(tmp_path / "ledger.jsonl") as target:
        def lines() -> list[str]:
            return target.ledger_path.read_text().splitlines()

        asyncio.run(asyncio.wait_for(_session(store, target.url, lines), timeout=120))
    assert reel("-C", str(store), "views", check=True).stdout.decode().split("\t")[0] == "wide"


def test_mcp_refuses_caps_wider_than_the_trunk(tmp_path: Path, reel) -> None:
    reel("init", check=True)
    reel("config", "trunk.main.cap", "read=docs/", check=True)
    done = reel("mcp", "--cap", "read,write=docs/", input=b"")
    assert done.returncode == 6 and b"E009" in done.stderr, (done.returncode, done.stderr)
    assert sys.executable  # the server never started: nothing to clean up
