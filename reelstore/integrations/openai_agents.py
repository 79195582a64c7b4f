"""The OpenAI Agents SDK: the attempt's tools as function tools.

    with Attempt(store, "attempt-1", caps=CAPS) as attempt:
        agent = Agent(name="refunds", instructions="...", tools=tools(attempt))
        Runner.run_sync(agent, "refund customer 7")

The tools take loosely typed arguments (an HTTP body is any JSON), so their schemas are not strict.
Needs `reelstore[openai-agents]`.
"""

from __future__ import annotations

from reelstore.extras import needs

needs("agents", "openai-agents", "reelstore.integrations.openai_agents")

from agents import FunctionTool, function_tool  # noqa: E402

from reelstore.integrations import Attempt, Tools  # noqa: E402


def tools(attempt: Attempt | Tools) -> list[FunctionTool]:
    """The tool set as function tools; a reel error comes back to the model as the tool's output."""
    found = attempt.tools if isinstance(attempt, Attempt) else attempt
    return [function_tool(fn, strict_mode=False) for fn in found.all()]
