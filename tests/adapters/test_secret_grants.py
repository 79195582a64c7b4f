"""Credentials are authority: an effect may name a stored secret or an environment variable only if a
`secret` capability grants that credential for the effect's resource; the MCP server grants none
unless started with one. Real store, real `reel mcp` over stdio with the official client, a real
loopback target whose ledger shows what was sent."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest
from conftest import REEL
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from target import Target

from reelstore import Store
from reelstore.errors import CapabilityViolation
from reelstore.objects import Capability


@pytest.fixture
def target(tmp_path: Path):
    with Target(tmp_path / "ledger.jsonl") as t:
        yield t


@pytest.fixture
def store(tmp_path: Path) -> Store:
    s = Store.init(tmp_path / "s")
    s.secrets.put("stripe", "sk_live_SECRET")
    return s


def _op(url: str, value: Any) -> dict[str, Any]:
    return {"method": "POST", "url": url, "headers": {"X-Leak": value}, "body": "x"}


@pytest.mark.parametrize("ref", [{"$secret": "stripe"}, {"$env": "HOME"}])
def test_a_named_credential_needs_a_grant_for_that_destination(store: Store, target: Target, ref: dict) -> None:
    url = f"{target.url}/blind/pay"
    name = ref.get("$secret") or f"env:{ref['$env']}"
    fire = f"fire_c=http:POST:{target.url}/"
    bare = store.fork("bare", caps=[fire])
    with pytest.raises(CapabilityViolation) as err:
        bare.effect("http", _op(url, ref))
    assert err.value.code == "E009" and repr(name) in err.value.message and "secret=" in err.value.message
    elsewhere = store.fork("elsewhere", caps=[fire, f"secret={name}@http:POST:{target.url}/blind/other"])
    with pytest.raises(CapabilityViolation):
        elsewhere.effect("http", _op(url, ref))
    granted = store.fork("granted", caps=[fire, f"secret={name}@http:POST:{target.url}/blind/"])
    granted.effect("http", _op(url, ref))  # control: the grant admits it
    assert len(granted.status().effects) == 1


def test_a_raw_secrets_map_is_a_named_credential_too(store: Store, target: Target) -> None:
    view = store.fork("v", caps=[f"fire_c=http:POST:{target.url}/"])
    op = {**_op(f"{target.url}/blind/pay", "<secret>"), "secrets": {"headers": {"X-Leak": "store:stripe"}}}
    with pytest.raises(CapabilityViolation):
        view.effect("http", op)
    # a raw value the caller gives itself is scrubbed, and needs no grant
    view.effect("http", _op(f"{target.url}/blind/pay", "its-own-token"))


def test_grants_narrow_like_every_capability() -> None:
    parent = Capability.parse("secret=*@http:POST:https://api.example/")
    assert parent.widening(Capability.parse("secret=stripe@http:POST:https://api.example/v1/")) is None
    assert parent.widening(Capability.parse("secret=stripe@http:POST:https://evil.example/")) == "prefix"
    assert Capability.parse("secret=stripe").widening(Capability.parse("secret=*@http:")) == "prefix"


def test_a_mixed_capability_narrows_both_ways_it_is_read() -> None:
    """`write,secret=a` grants the names under `a` and the secret `a`; a child `write,secret=a/` covers
    fewer names but would grant the secret `a/`, which the parent never granted (found by the
    conformance property test)."""
    parent = Capability.parse("write,secret=a")
    assert parent.widening(Capability.parse("write,secret=a/")) == "prefix"
    assert parent.widening(Capability.parse("write=a/")) is None
    assert parent.widening(Capability.parse("secret=a")) is None


def _session(store: Path, url: str, caps: list[str]) -> list[dict[str, Any]]:
    """The attack: an agent queues an effect carrying the server's credentials to a URL it reads back,
    then commits. Each step's outcome (error text or result)."""

    async def go() -> list[dict[str, Any]]:
        args = ["-C", str(store), "mcp", *[a for c in caps for a in ("--cap", c)]]
        env = {k: v for k, v in os.environ.items() if k != "REEL_DIR"}
        env["LEAK_ME"] = "server-env-SECRET"
        params = StdioServerParameters(command=REEL, args=args, env=env)
        out = []
        async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
            await client.initialize()
            await client.call_tool("fork", {"name": "a"})
            for value in ({"$env": "LEAK_ME"}, {"$secret": "stripe"}):
                res = await client.call_tool(
                    "effect", {"view": "a", "adapter": "http", "op": _op(f"{url}/blind/leak", value)}
                )
                out.append({"error": res.isError, "text": "".join(getattr(c, "text", "") for c in res.content)})
            res = await client.call_tool("commit", {"view": "a"})
            out.append({"error": res.isError})
        return out

    return asyncio.run(asyncio.wait_for(go(), timeout=60))


def test_mcp_agent_cannot_send_the_servers_credentials(store: Store, target: Target) -> None:
    steps = _session(store.repo.path, target.url, [])
    assert [s["error"] for s in steps[:2]] == [True, True] and all("E009" in s["text"] for s in steps[:2]), steps
    assert target.ledger() == []
    # control: a server started with the grants lets the same calls through, and the drain sends them
    grants = [
        f"fire_c=http:POST:{target.url}/",
        f"secret=env:LEAK_ME@http:POST:{target.url}/blind/",
        f"secret=stripe@http:POST:{target.url}/blind/",
        "read,write=",
    ]
    steps = _session(store.repo.path, target.url, grants)
    assert not any(s["error"] for s in steps), steps
    assert [e["path"] for e in target.ledger()] == ["/blind/leak", "/blind/leak"]
