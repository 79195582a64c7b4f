"""pydantic-ai: the attempt's tools as a toolset.

    with Attempt(store, "attempt-1", caps=CAPS) as attempt:
        agent = Agent(model, toolsets=[toolset(attempt)])
        agent.run_sync("refund customer 7")

Needs `reelstore[pydantic-ai]`.
"""

from __future__ import annotations

from typing import Any

from reelstore.extras import needs

needs("pydantic_ai", "pydantic-ai", "reelstore.integrations.pydantic_ai")

from pydantic_ai import Tool  # noqa: E402
from pydantic_ai.toolsets import FunctionToolset  # noqa: E402

from reelstore.integrations import Attempt, Tools  # noqa: E402


def toolset(attempt: Attempt | Tools) -> FunctionToolset[Any]:
    """The tool set as a pydantic-ai toolset; a reel error comes back to the model as the tool's return."""
    found = attempt.tools if isinstance(attempt, Attempt) else attempt
    return FunctionToolset([Tool(fn, takes_ctx=False) for fn in found.all()])
