"""LangGraph and LangChain: the attempt's tools as LangChain tools, and graph nodes that end an attempt.

    with Attempt(store, "attempt-1", caps=CAPS) as attempt:
        graph = agent_graph(model, attempt)                 # a ReAct loop over its tools, then a commit node
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
from langchain_core.messages import AnyMessage, SystemMessage  # noqa: E402
from langchain_core.tools import BaseTool, StructuredTool  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from langgraph.graph import END, START, MessagesState, StateGraph  # noqa: E402
from langgraph.prebuilt import ToolNode, tools_condition  # noqa: E402
from langgraph.types import interrupt  # noqa: E402

from reelstore.integrations import Attempt, Tools  # noqa: E402
from reelstore.kernel.views import load_live  # noqa: E402

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
    """A node that interrupts the graph with what the attempt would do (the changed names, the pending
    effects, and `effects`: the id `reel approve VIEW --effects ID` binds an approval to); resumed with
    `APPROVE` it commits, with anything else it aborts. The graph needs a checkpointer to be resumed.
    Where a service rule requires approvals, the approvers record them (`reel approve`) before the
    graph is resumed; without them the commit raises E018 and the attempt is aborted."""

    def review(state: MessagesState) -> dict[str, Any]:
        if not attempt.view.live:
            return {}
        if attempt.abandoned is not None:
            attempt.abort()
            return {}
        status = attempt.view.status()
        effects = load_live(attempt.store.repo, attempt.name, settle=False).view.effects
        decision = interrupt(
            {
                "view": attempt.name,
                "changes": [c.name for c in attempt.view.diff()],
                "pending": [e.resource for e in status.effects],
                "effects": effects.hex() if effects else None,
            }
        )
        if decision == APPROVE:
            attempt.commit()
        else:
            attempt.abort()
        return {}

    return review


def agent_graph(model: BaseChatModel, attempt: Attempt, approve: bool = False, prompt: str | None = None) -> Any:
    """A ReAct loop over the attempt's tools (the model, then its tool calls, until it answers without
    one), then a node that commits (`approve`: asks first, so the graph gets a checkpointer)."""
    found = tools(attempt)
    bound = model.bind_tools(found)
    lead: list[AnyMessage] = [SystemMessage(prompt)] if prompt else []

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [bound.invoke([*lead, *state["messages"]])]}

    graph = StateGraph(MessagesState)
    end: Any = approval_node(attempt) if approve else commit_node(attempt)  # a node: state -> update
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode(found))
    graph.add_node("commit", end)
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition, {"tools": "tools", END: "commit"})
    graph.add_edge("tools", "agent")
    graph.add_edge("commit", END)
    return graph.compile(checkpointer=InMemorySaver() if approve else None)
