"""LangGraph and LangChain: the attempt's tools as LangChain tools, and graph nodes that end an attempt.

    with Attempt(store, "attempt-1", caps=CAPS) as attempt:
        graph = agent_graph(model, attempt)                 # the prebuilt ReAct agent, then a commit node
        graph.invoke({"messages": [("user", "refund customer 7")]})

With `approve=True` the graph stops before committing (`interrupt`) and shows what the attempt would
change and send; `graph.invoke(Command(resume="approve"), config)` commits, any other answer aborts.
Needs `reelstore[langgraph]`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from reelstore.extras import needs

needs("langgraph", "langgraph", "reelstore.integrations.langgraph")

from langchain_core.language_models import BaseChatModel  # noqa: E402
from langchain_core.tools import BaseTool, StructuredTool  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from langgraph.graph import END, START, MessagesState, StateGraph  # noqa: E402
from langgraph.prebuilt import create_react_agent  # noqa: E402
from langgraph.types import interrupt  # noqa: E402

from reelstore.integrations import Attempt, Tools  # noqa: E402

APPROVE = "approve"
"""The answer that commits an attempt held by `approval_node`; anything else aborts it."""


def tools(attempt: Attempt | Tools) -> list[BaseTool]:
    """The tool set as LangChain tools; a reel error comes back to the model as the tool's result."""
    found = attempt.tools if isinstance(attempt, Attempt) else attempt
    return [StructuredTool.from_function(fn) for fn in found.all()]


def commit_node(attempt: Attempt) -> Callable[[MessagesState], dict[str, Any]]:
    """A node that ends the attempt: aborted if the model abandoned it, else committed (effects sent)."""
    def commit(state: MessagesState) -> dict[str, Any]:
        if attempt.view.live:
            if attempt.abandoned is not None:
                attempt.abort()
            else:
                attempt.commit()
        return {}
    return commit


def approval_node(attempt: Attempt) -> Callable[[MessagesState], dict[str, Any]]:
    """A node that interrupts the graph with what the attempt would do; resumed with `APPROVE` it
    commits, with anything else it aborts. The graph needs a checkpointer to be resumed."""
    def review(state: MessagesState) -> dict[str, Any]:
        if not attempt.view.live:
            return {}
        if attempt.abandoned is not None:
            attempt.abort()
            return {}
        status = attempt.view.status()
        decision = interrupt({"view": attempt.name, "changes": [c.name for c in attempt.view.diff()],
                              "pending": [e.resource for e in status.effects]})
        if decision == APPROVE:
            attempt.commit()
        else:
            attempt.abort()
        return {}
    return review


def agent_graph(model: BaseChatModel, attempt: Attempt, approve: bool = False, prompt: str | None = None) -> Any:
    """The prebuilt ReAct agent over the attempt's tools, then a node that commits (`approve`: asks first)."""
    graph = StateGraph(MessagesState)
    graph.add_node("agent", create_react_agent(model, tools(attempt), prompt=prompt))
    end: Any = approval_node(attempt) if approve else commit_node(attempt)  # a node: state -> update
    graph.add_node("commit", end)
    graph.add_edge(START, "agent")
    graph.add_edge("agent", "commit")
    graph.add_edge("commit", END)
    return graph.compile(checkpointer=InMemorySaver() if approve else None)
