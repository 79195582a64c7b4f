"""A LangGraph ReAct agent whose tools act on a reel view, driven by LangChain's fake chat model (no
network, no model weights). The scripted model makes two tool calls at once, one call the view's
capabilities refuse (it sees the refusal as the tool's result), then finishes or abandons.

    python examples/langgraph_agent.py STORE TARGET_URL [commit|abandon|approve|reject]
"""

from __future__ import annotations

import json
import sys
from typing import Any

from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.types import Command

from reelstore import Store
from reelstore.integrations import Attempt
from reelstore.integrations.langgraph import agent_graph


class ScriptedModel(FakeMessagesListChatModel):
    """LangChain's fake model, able to take tools: it answers from its list whatever it is asked."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedModel:
        return self


def script(url: str, give_up: bool) -> list[AIMessage]:
    def call(name: str, i: int, **args: Any) -> dict[str, Any]:
        return {"name": name, "args": args, "id": f"call-{i}", "type": "tool_call"}

    last = [call("abandon", 4, reason="the customer withdrew the request")] if give_up else []
    return [
        AIMessage(
            content="",
            tool_calls=[
                call("queue_http", 1, method="POST", url=f"{url}/refunds", body={"customer": 7, "amount": 12.5}),
                call("queue_http", 2, method="POST", url=f"{url}/notify", body={"text": "refund sent"}),
                call("write_file", 3, path="notes/7.md", text="refunded 12.50\n"),
            ],
        ),
        AIMessage(content="", tool_calls=[call("queue_http", 5, method="POST", url="http://127.0.0.1:9/other")]),
        *([AIMessage(content="", tool_calls=last)] if last else []),
        AIMessage(content="done"),
    ]


def main(path: str, url: str, mode: str) -> None:
    store = Store.open_or_init(path)
    caps = ["read,write=notes/", f"fire_c=http:POST:{url}/"]
    model = ScriptedModel(responses=script(url, give_up=mode == "abandon"))
    with Attempt(store, f"langgraph-{mode}", caps=caps, commit=mode in ("commit", "abandon")) as attempt:
        graph = agent_graph(model, attempt, approve=mode in ("approve", "reject"))
        config = {"configurable": {"thread_id": "1"}}
        state = graph.invoke({"messages": [("user", "refund customer 7")]}, config)
        for msg in state["messages"]:
            if isinstance(msg, ToolMessage) and "error" in json.loads(msg.content):
                print(f"tool {msg.name} answered: {msg.content}")
        if "__interrupt__" in state:
            print(f"held for approval: {json.dumps(state['__interrupt__'][0].value, sort_keys=True)}")
            graph.invoke(Command(resume=mode), config)
    done = attempt.result
    sent = [o.state for o in done.drain.outcomes] if done and done.drain else []
    print(f"committed: {sent}" if done else f"aborted ({attempt.abandoned or 'not approved'}): nothing sent")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2].rstrip("/"), sys.argv[3] if len(sys.argv) > 3 else "commit")
