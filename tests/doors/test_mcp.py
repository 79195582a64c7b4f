"""`reel mcp` driven by the official MCP client over stdio and over streamable HTTP, against a real store
and a loopback ledger."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

import httpx
import pytest
from conftest import REEL
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from target import Target

from reelstore.backend.repo import Repo

TOOLS = {
    "fork",
    "ls",
    "get",
    "put",
    "rm",
    "diff",
    "status",
    "effect",
    "commit",
    "abort",
    "views",
    "log",
    "ops",
    "operation",
    "capabilities",
}
TOKEN = "test-token-0123456789"


def _text(result) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


def _doc(result):
    assert not result.isError, _text(result)
    if result.structuredContent is not None:
        return result.structuredContent.get("result", result.structuredContent)
    return json.loads(_text(result))


def _server_args(store: Path, url: str) -> list[str]:
    return [
        "-C",
        str(store),
        "mcp",
        "--cap",
        "read,write,delete=notes/",
        "--cap",
        f"fire_c=http:POST:{url}/blind/;budget=5",
    ]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "REEL_DIR"}
    env["REEL_MCP_TOKEN"] = TOKEN
    return env


@asynccontextmanager
async def _over_stdio(store: Path, url: str, _port: int) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(command=REEL, args=_server_args(store, url), env=_env())
    async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
        yield client


def _listening(port: int) -> set[str]:
    """The local addresses of the sockets listening on `port` (from /proc/net/tcp and tcp6)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in list(f)[1:]:
                local, state = line.split()[1], line.split()[3]
                addr, hexport = local.rsplit(":", 1)
                if state == "0A" and int(hexport, 16) == port:
                    found.add(addr)
    return found


async def until_listening(server: subprocess.Popen[bytes], port: int) -> None:
    """Wait (at most 60 s) until `reel mcp --http` accepts connections on `port`; fail if it exits first."""
    deadline = time.monotonic() + 60
    while True:
        assert server.poll() is None, server.communicate()[1].decode()
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            assert time.monotonic() < deadline, "reel mcp --http never listened"
            await asyncio.sleep(0.05)


@asynccontextmanager
async def _over_http(store: Path, url: str, port: int) -> AsyncIterator[ClientSession]:
    server = subprocess.Popen(
        [REEL, *_server_args(store, url), "--http", str(port)],
        env=_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        await until_listening(server, port)
        # only loopback: 127.0.0.1 in /proc's little-endian hex, and nothing on any other address
        assert _listening(port) == {"0100007F"}, _listening(port)
        # a request without the bearer token is refused before it reaches a tool
        async with httpx.AsyncClient() as anonymous:
            refused = await anonymous.post(
                f"http://127.0.0.1:{port}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
            )
            assert refused.status_code == 401, refused.text
        authed = httpx.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=httpx.Timeout(30, read=120))
        async with (
            authed,
            streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=authed) as (read, write, _),
            ClientSession(read, write) as client,
        ):
            yield client
    finally:
        server.send_signal(signal.SIGINT)  # an operator's Ctrl-C
        try:
            err = server.communicate(timeout=30)[1]
        except subprocess.TimeoutExpired:
            server.kill()
            server.communicate()
            raise AssertionError("reel mcp --http did not stop on SIGINT") from None
    # The SDK logs a traceback of its own when the client ends its session while the standalone SSE stream
    # is open (mcp 1.30); no frame of reel's may appear, and the server exits 0.
    assert server.returncode == 0 and not re.search(rb'File "[^"]*/reelstore/', err), err.decode()


Transport = Callable[[Path, str, int], AbstractAsyncContextManager[ClientSession]]


async def _session(transport: Transport, store: Path, url: str, port: int, ledger_lines) -> None:
    async with transport(store, url, port) as client:
        await client.initialize()
        listed = await client.list_tools()
        names = {t.name for t in listed.tools}
        assert names == TOOLS
        schema = next(t for t in listed.tools if t.name == "put").inputSchema
        assert schema["required"] == ["view", "files"]

        wide = await client.call_tool("fork", {"name": "w", "caps": ["read,write="]})
        assert wide.isError and "E009: " in _text(wide)

        _doc(await client.call_tool("fork", {"name": "a"}))
        _doc(
            await client.call_tool(
                "put",
                {
                    "view": "a",
                    "files": [
                        {"path": "notes/plan.md", "text": "refund 42\n"},
                        {"path": "notes/raw.bin", "base64": "AAEC"},
                    ],
                },
            )
        )
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
        assert committed["record"] and committed["state"] == "done"
        assert [o["state"] for o in committed["operations"]] == ["succeeded"]
        assert len(ledger_lines()) == 1
        _doc(await client.call_tool("fork", {"name": "c"}))
        untracked = await client.call_tool("commit", {"view": "c", "retry": 2})  # this trunk tracks no remote
        assert untracked.isError and "E014: " in _text(untracked) and "retry" in _text(untracked)
        _doc(await client.call_tool("abort", {"view": "c"}))

        # a view forked outside the server with the trunk's full authority is out of the agent's reach
        foreign = await client.call_tool("commit", {"view": "wide"})
        assert foreign.isError and "E009: " in _text(foreign)
        assert [v["name"] for v in _doc(await client.call_tool("views", {}))] == []


@pytest.mark.parametrize("transport", [_over_stdio, _over_http], ids=["stdio", "streamable-http"])
def test_mcp_server_through_the_official_client(
    tmp_path: Path, reel, reserve_port: Callable[[], int], transport: Transport
) -> None:
    store = tmp_path / "store"
    store.mkdir()
    Repo.init(store)
    reel("-C", str(store), "fork", "wide", check=True)
    with Target(tmp_path / "ledger.jsonl") as target:

        def lines() -> list[str]:
            return target.ledger_path.read_text().splitlines()

        asyncio.run(asyncio.wait_for(_session(transport, store, target.url, reserve_port(), lines), timeout=120))
    assert reel("-C", str(store), "views", check=True).stdout.decode().split("\t")[0] == "wide"


def test_mcp_refuses_caps_wider_than_the_trunk(tmp_path: Path, reel) -> None:
    reel("init", check=True)
    reel("config", "trunk.main.cap", "read=docs/", check=True)
    done = reel("mcp", "--cap", "read,write=docs/", input=b"")
    assert done.returncode == 6 and b"E009" in done.stderr, (done.returncode, done.stderr)
    assert sys.executable  # the server never started: nothing to clean up
