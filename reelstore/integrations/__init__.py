"""Agent framework integrations: one attempt of an agent is one view, and its tools act on that view.

    with Attempt(store, "attempt-1", caps=["read,write=notes/", "fire_c=http:POST:https://api.example.com/"]) as a:
        run_the_agent(tools=langgraph.tools(a))     # or openai_agents.tools(a), pydantic_ai.toolset(a)
    # clean exit: committed (its effects are sent once); an exception or a model's `abandon`: aborted

`Tools` is the framework-neutral tool set (`read_file`, `write_file`, `list_files`, `queue_http`,
`status`, `abandon`); the modules beside this one wrap it for LangGraph / LangChain, the OpenAI Agents
SDK and pydantic-ai.
Every tool returns a JSON string, so a model sees a reel error as a tool result with its code
(`{"error": {"code": "E009", ...}}`) and the agent loop goes on. Tool calls the framework runs in
parallel threads land one after another on the view (`reelstore.capture.serial`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from types import TracebackType
from typing import Any

from reelstore.api import Store, ViewHandle
from reelstore.capture import serial
from reelstore.errors import BadInput, ReelError
from reelstore.kernel.verbs import CommitResult
from reelstore.objects import Capability

Tool = Callable[..., str]


def _answer(doc: Any) -> str:
    return json.dumps(doc, sort_keys=True)


class Tools:
    """The tools of one view, each a plain function of JSON-able arguments returning a JSON string."""

    def __init__(self, view: ViewHandle, attempt: Attempt | None = None) -> None:
        self.view = view
        self.attempt = attempt

    def _run(self, fn: Callable[[], Any]) -> str:
        try:
            with serial(self.view):
                return _answer(fn())
        except ReelError as err:
            return _answer({"error": err.to_json()})
        except (ValueError, TypeError) as err:  # arguments a model got wrong: named, never raised at the loop
            return _answer({"error": BadInput(str(err)).to_json()})

    def read_file(self, path: str) -> str:
        """Read the text stored under `path` in this attempt's view."""
        return self._run(lambda: {"path": path, "text": self.view.get(path).decode("utf-8", "replace")})

    def write_file(self, path: str, text: str) -> str:
        """Write `text` under `path` in this attempt's view (nothing leaves the view until it is committed)."""
        return self._run(lambda: {"path": path, "id": self.view.put(path, text).hex()})

    def list_files(self, prefix: str = "") -> str:
        """List the names stored under `prefix` in this attempt's view."""
        return self._run(lambda: {"names": [name for name, _ in self.view.ls(prefix)]})

    def queue_http(self, method: str, url: str, body: Any = None, headers: dict[str, str] | None = None) -> str:
        """Queue an HTTP request (e.g. POST https://api.example.com/refunds with a JSON body). It is sent
        once, and only if this attempt is committed; the answer says it is pending."""

        def queue() -> dict[str, Any]:
            op: dict[str, Any] = {"method": method.upper(), "url": url, "headers": dict(headers or {})}
            if body is not None:  # as text, so any JSON the model wrote (floats too) is stored as given
                op["body"] = body if isinstance(body, str) else json.dumps(body, sort_keys=True)
                op["headers"].setdefault("Content-Type", "application/json")
            made = self.view.effect("http", op)
            return {
                "pending": made.id.hex(),
                "resource": made.resource,
                "class": made.effect_class,
                "note": "queued; it is sent only if this attempt is committed",
            }

        return self._run(queue)

    def status(self) -> str:
        """What this attempt has changed and queued so far."""

        def show() -> dict[str, Any]:
            st = self.view.status()
            return {
                "view": self.view.name,
                "changes": [c.name for c in self.view.diff()],
                "pending": [e.resource for e in st.effects],
            }

        return self._run(show)

    def abandon(self, reason: str) -> str:
        """Give up this attempt: nothing it wrote or queued will happen. Say why."""
        if self.attempt is None:
            return _answer({"error": BadInput("this tool set has no attempt to abandon").to_json()})
        self.attempt.abandoned = reason or "abandoned"
        return _answer({"abandoned": self.attempt.abandoned, "note": "nothing of this attempt will be sent"})

    def all(self) -> list[Tool]:
        """Every tool, in a fixed order; `abandon` only when the tools belong to an `Attempt`."""
        out: list[Tool] = [self.read_file, self.write_file, self.list_files, self.queue_http, self.status]
        return out + [self.abandon] if self.attempt is not None else out


class Attempt:
    """One attempt of an agent as a context manager: a fresh view forked on entry, committed on a clean
    exit, aborted if the block raises or the model called `abandon` (`commit=False`: never committed
    here, for a graph whose own node commits after a human approved)."""

    def __init__(
        self,
        store: Store,
        name: str,
        caps: Iterable[Capability | str] | None = None,
        source: str | None = None,
        message: str = "",
        commit: bool = True,
    ) -> None:
        self.store = store
        self.name = name
        self.caps = caps
        self.source = source
        self.message = message
        self.commit_on_exit = commit
        self.abandoned: str | None = None
        """Why the model gave up (its `abandon` call), or None."""
        self.result: CommitResult | None = None
        self._view: ViewHandle | None = None
        self._tools: Tools | None = None

    @property
    def view(self) -> ViewHandle:
        if self._view is None:
            raise BadInput(f"attempt {self.name!r} is not started: use it in a with block")
        return self._view

    @property
    def tools(self) -> Tools:
        if self._tools is None:
            self._tools = Tools(self.view, self)
        return self._tools

    def __enter__(self) -> Attempt:
        self._view = self.store.fork(self.name, self.source, self.caps)
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if not self.view.live:
            return
        if kind is not None or self.abandoned is not None or not self.commit_on_exit:
            self.abort()
        else:
            self.commit()

    def commit(self) -> CommitResult:
        """Commit the view: its effects are sent (E011 / E017 if one did not succeed, as `commit` raises)."""
        with serial(self.view):
            try:
                return self.view.commit(self.message)
            finally:
                self.result = self.view.result

    def abort(self) -> list[str]:
        with serial(self.view):
            return self.view.abort()
