"""An OpenAI Agents SDK agent whose tools act on a reel view, driven by a scripted `Model` (the SDK's
own seam for test models: no network, no API key). The model makes two tool calls at once, one call
the view's capabilities refuse (it sees the refusal as the tool's output), then finishes or abandons.

    python examples/openai_agents_agent.py STORE TARGET_URL [commit|abandon]
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from typing import Any

from agents import Agent, Model, ModelResponse, RunConfig, Runner, ToolCallOutputItem, Usage
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

from reelstore import Store
from reelstore.integrations import Attempt
from reelstore.integrations.openai_agents import tools


class ScriptedModel(Model):
    """Answers each turn with the next entry of its script, whatever the input."""

    def __init__(self, turns: list[list[Any]]) -> None:
        self.turns = iter(turns)

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        return ModelResponse(output=next(self.turns), usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError("this example does not stream")


def call(name: str, i: int, **args: Any) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(type="function_call", name=name, call_id=f"call-{i}", arguments=json.dumps(args))


def script(url: str, give_up: bool) -> list[list[Any]]:
    done = ResponseOutputMessage(
        id="m1",
        type="message",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(type="output_text", text="done", annotations=[])],
    )
    return [
        [
            call("queue_http", 1, method="POST", url=f"{url}/refunds", body={"customer": 7, "amount": 12.5}),
            call("queue_http", 2, method="POST", url=f"{url}/notify", body={"text": "refund sent"}),
            call("write_file", 3, path="notes/7.md", text="refunded 12.50\n"),
        ],
        [call("queue_http", 5, method="POST", url="http://127.0.0.1:9/other")],
        *([[call("abandon", 4, reason="the customer withdrew the request")]] if give_up else []),
        [done],
    ]


def main(path: str, url: str, mode: str) -> None:
    store = Store.open_or_init(path)
    caps = ["read,write=notes/", f"fire_c=http:POST:{url}/"]
    model = ScriptedModel(script(url, give_up=mode == "abandon"))
    with Attempt(store, f"agents-{mode}", caps=caps) as attempt:
        agent = Agent(name="refunds", instructions="Refund customers.", tools=tools(attempt), model=model)
        result = Runner.run_sync(agent, "refund customer 7", run_config=RunConfig(tracing_disabled=True))
        for item in result.new_items:
            if isinstance(item, ToolCallOutputItem) and "error" in json.loads(str(item.output)):
                print(f"tool {item.raw_item['call_id']} answered: {item.output}")  # type: ignore[index]
    done = attempt.result
    sent = [o.state for o in done.drain.outcomes] if done and done.drain else []
    print(f"committed: {sent}" if done else f"aborted ({attempt.abandoned}): nothing sent")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2].rstrip("/"), sys.argv[3] if len(sys.argv) > 3 else "commit")
