"""An MCP client session against `reel mcp`: fork, write, queue an effect, abort; then again, commit.

    python examples/mcp_session.py STORE TARGET_URL

STORE is a reel store (created if absent); TARGET_URL receives one POST, from the committed view only.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from reelstore import Store


def result(reply) -> object:
    text = "".join(getattr(c, "text", "") for c in reply.content)
    if reply.isError:
        raise SystemExit(f"tool error: {text}")
    doc = reply.structuredContent
    if doc is None:
        return json.loads(text)
    return doc["result"] if set(doc) == {"result"} else doc  # lists come wrapped in {"result": …}


async def main(store: str, url: str) -> None:
    Store.open_or_init(store)
    reel = shutil.which("reel") or "reel"
    server = StdioServerParameters(
        command=reel,
        args=["-C", store, "mcp", "--cap", "read,write=notes/", "--cap", f"fire_c=http:POST:{url};budget=2"],
    )
    async with stdio_client(server) as (read, write), ClientSession(read, write) as s:
        await s.initialize()
        op = {"method": "POST", "url": f"{url}/refund", "json": {"order": 42}}
        for name, decision in (("try-1", "abort"), ("try-2", "commit")):
            result(await s.call_tool("fork", {"name": name}))
            result(
                await s.call_tool(
                    "put", {"view": name, "files": [{"path": "notes/plan.md", "text": "refund order 42\n"}]}
                )
            )
            result(await s.call_tool("effect", {"view": name, "adapter": "http", "op": op}))
            done = result(await s.call_tool(decision, {"view": name}))
            print(f"{name}: {decision} -> {json.dumps(done, sort_keys=True)[:120]}")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2].rstrip("/")))
