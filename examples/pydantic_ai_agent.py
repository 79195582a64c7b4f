"""A pydantic-ai agent whose tools act on a reel view, driven by pydantic-ai's `FunctionModel` (no
network, no model weights). The model makes two tool calls at once, one call the view's capabilities
refuse (it sees the refusal as the tool's return), then finishes or abandons.

    python examples/pydantic_ai_agent.py STORE TARGET_URL [commit|abandon]
"""

from __future__ import annotations

import json
import sys
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from reelstore import Store
from reelstore.integrations import Attempt
from reelstore.integrations.pydantic_ai import toolset


def scripted(url: str, give_up: bool) -> FunctionModel:
    def call(name: str, i: int, **args: Any) -> ToolCallPart:
        return ToolCallPart(name, args, f"call-{i}")

    turns = [
        [
            call("queue_http", 1, method="POST", url=f"{url}/refunds", body={"customer": 7, "amount": 12.5}),
            call("queue_http", 2, method="POST", url=f"{url}/notify", body={"text": "refund sent"}),
            call("write_file", 3, path="notes/7.md", text="refunded 12.50\n"),
        ],
        [call("queue_http", 5, method="POST", url="http://127.0.0.1:9/other")],
        *([[call("abandon", 4, reason="the customer withdrew the request")]] if give_up else []),
        [TextPart("done")],
    ]

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        turn = sum(isinstance(m, ModelResponse) for m in messages)
        return ModelResponse(parts=turns[turn])

    return FunctionModel(answer)


def main(path: str, url: str, mode: str) -> None:
    store = Store.open_or_init(path)
    caps = ["read,write=notes/", f"fire_c=http:POST:{url}/"]
    with Attempt(store, f"pydantic-ai-{mode}", caps=caps) as attempt:
        agent = Agent(scripted(url, give_up=mode == "abandon"), toolsets=[toolset(attempt)])
        result = agent.run_sync("refund customer 7")
        for message in result.all_messages():
            for part in message.parts:
                if isinstance(part, ToolReturnPart) and "error" in json.loads(part.content):
                    print(f"tool {part.tool_name} answered: {part.content}")
    done = attempt.result
    sent = [o.state for o in done.drain.outcomes] if done and done.drain else []
    print(f"committed: {sent}" if done else f"aborted ({attempt.abandoned}): nothing sent")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2].rstrip("/"), sys.argv[3] if len(sys.argv) > 3 else "commit")
