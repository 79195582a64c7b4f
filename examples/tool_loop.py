"""A tool-calling loop with a scripted model (no network, no model weights): every tool call the
"model" makes is a reel effect in a view, and nothing reaches the target until the run is approved.

    python examples/tool_loop.py STORE TARGET_URL [approve|reject]
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator

from reelstore import HttpRequest, Store

SCRIPT = [
    {"tool": "write_note", "args": {"path": "notes/triage.md", "text": "customer 7 asked for a refund\n"}},
    {"tool": "send_message", "args": {"channel": "support", "text": "refunding customer 7"}},
    {"tool": "refund", "args": {"customer": 7, "amount": 1200}},
    {"tool": "done", "args": {}},
]


def scripted_model() -> Iterator[dict]:
    """Stands in for a model: yields its tool calls one by one."""
    yield from SCRIPT


def main(path: str, url: str, decision: str) -> None:
    store = Store.open_or_init(path)
    view = store.fork("agent-run")
    for call in scripted_model():
        tool, args = call["tool"], call["args"]
        if tool == "done":
            break
        if tool == "write_note":
            view.put(args["path"], args["text"])
        elif tool == "send_message":
            view.effect("http", HttpRequest("POST", f"{url}/messages", json=args))
        elif tool == "refund":
            view.effect("http", HttpRequest("POST", f"{url}/refunds", json=args))
        print(f"model called {tool}({json.dumps(args, sort_keys=True)}): queued, nothing sent")
    pending = view.status().effects
    print(f"{len(pending)} effects pending; decision: {decision}")
    if decision == "approve":
        result = view.commit()
        states = [o.state for o in result.drain.outcomes] if result.drain else []
        print(f"committed; effects: {states}")
    else:
        view.abort()
        print("aborted; no effect will ever fire")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2].rstrip("/"), sys.argv[3] if len(sys.argv) > 3 else "approve")
