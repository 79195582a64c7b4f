"""`reel mcp`: the store's verbs as MCP tools, so an agent host can give an agent transactional tools.

The server is started for one store, one trunk and a set of capabilities. Every view it forks is
narrowed to those capabilities, and every tool that names a view first checks that the view's own
capabilities are covered by them: an agent connected to the server can act on its views and on
views no wider than the server, never widen its authority by naming another view (E009). Errors
come back as MCP tool errors whose text starts with the E-code (`E009: …`), the same codes and
messages as the command line.

What a model must not misread is not an error: a commit that landed but owes an effect returns a
normal result saying the commit stands, which operations are owed, that they must not be queued
again, and who settles them; the `operation` tool asks one operation's state later. A model that
retries on every tool error therefore never queues a second refund behind an owed first one.

Each tool runs its verb in a worker thread with a store of that thread's own (a store on disk is
shared by processes the same way), so a drain waiting on a slow target blocks neither the event
loop nor any other session's calls; a store that lives only in memory is used under one lock.
A session budget (`session_budget`) bounds the effects all views committed through this server may
carry, however many views the agent forks; a capability's own `budget=N` bounds each view.

The SDK is pinned below 2: mcp 2 needs h11 ≥ 0.16 and mitmproxy 11 (the interception `reel run`
uses, the last release for Python 3.11) needs h11 ≤ 0.14, so one environment cannot hold both.
"""

from __future__ import annotations

import base64
import hmac
import threading
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar

import anyio.to_thread
from mcp.server.fastmcp import FastMCP
from mcp.server.fastmcp.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field

from reelstore.api import Store
from reelstore.backend.repo import Repo
from reelstore.errors import BadInput, BudgetExhausted, NotFound, ReelError
from reelstore.kernel import admission
from reelstore.kernel.views import load_live
from reelstore.objects import Capability
from reelstore.objects.ref import HEAD_PREFIX
from reelstore.wording import plural

if TYPE_CHECKING:
    from reelstore.drain.ops import Operation
    from reelstore.kernel.verbs import CommitResult

T = TypeVar("T")

READ = ToolAnnotations(readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=False)
WRITE = ToolAnnotations(readOnlyHint=False, destructiveHint=False, openWorldHint=False)
"""Changes only the agent's own uncommitted view: nothing leaves the store."""
DISCARD = ToolAnnotations(readOnlyHint=False, destructiveHint=True, idempotentHint=True, openWorldHint=False)
QUEUE = ToolAnnotations(readOnlyHint=False, destructiveHint=True, openWorldHint=True)
"""Queues what a commit sends to the outside world."""
FIRE = ToolAnnotations(readOnlyHint=False, destructiveHint=True, idempotentHint=False, openWorldHint=True)

ViewName = Annotated[str, Field(description="The view's name, as given to fork")]


class FileWrite(BaseModel):
    """One file of a `put`: text (UTF-8) or base64 bytes."""

    model_config = ConfigDict(extra="forbid")
    path: str = Field(description="Name in the view's namespace, e.g. docs/plan.md")
    text: str | None = Field(default=None, description="Content as text (stored as UTF-8)")
    base64: str | None = Field(default=None, description="Content as base64, for binary data")


class HttpOp(BaseModel):
    """An HTTP request to send when the view is committed. Any key not listed is refused."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    method: str = Field(default="GET", description="Upper-case HTTP method, e.g. POST")
    url: str = Field(description="Absolute http:// or https:// URL")
    headers: dict[str, str | dict[str, str]] | None = Field(
        default=None,
        description='Header name to value; a value may be {"$secret": NAME} or {"$env": VAR}, '
        "resolved when the request is sent",
    )
    json_body: Any = Field(
        default=None, alias="json", description="JSON body (sent canonically: sorted keys; floats in shortest form)"
    )
    body: str | None = Field(default=None, description="Raw text body instead of json")
    etag: str | None = Field(default=None, description="Makes it Class B: sent as If-Match and re-checked at commit")


class FsOp(BaseModel):
    """A file write or delete under the fs adapter's root, done when the view is committed."""

    model_config = ConfigDict(extra="forbid")
    action: Literal["write", "delete"] = Field(description="write or delete")
    path: str = Field(description="Path relative to the fs adapter's root")
    content: str | None = Field(default=None, description="write: the file's text")
    mode: str | None = Field(default=None, description="write: octal permission bits, e.g. 0644")


class OperationState(BaseModel):
    """One operation (an effect of a committed record) and who settles it."""

    op: str = Field(description="Operation id; ask the operation tool with it")
    index: int = Field(description="The effect's position in its record")
    resource: str = Field(description="What it acts on, e.g. http:POST:https://h/refund")
    delivery: str = Field(description="keyed, queryable, two-phase or blind")
    state: str = Field(description="pending, not_sent, unknown (owed) or succeeded, failed, absent (settled)")
    owed: bool = Field(description="True while the store still owes it: never queue it again")
    evidence: str = Field(description="What the store knows about its outcome")
    settled_by: str = Field(description="Who settles it while it is owed; empty once settled")
    next_action: str = Field(description="The operator's next step")


class CommitReport(BaseModel):
    """What a commit did. `committed` is true whenever the commit landed, even if effects are owed."""

    committed: bool = Field(description="The view's changes and effects are in the trunk (or its parent view)")
    view: str
    target: str = Field(description="The ref it was committed into")
    record: str | None = Field(description="The trunk record written, or null for a merge into a parent view")
    state: Literal["done", "owed", "failed", "merged"] = Field(
        description="done: every effect succeeded; owed: some are pending or unknown and the store settles "
        "them; failed: the target refused some (final); merged: committed into a parent view"
    )
    do_not_queue_again: bool = Field(description="True when effects are owed: queueing them again sends them twice")
    summary: str
    operations: list[OperationState]


class Proposal(BaseModel):
    """A view left for a person to review and commit."""

    state: Literal["proposed"]
    view: str
    effects: int = Field(description="Effects the view will send once a person commits it")
    changes: int = Field(description="Names the view changed")
    next_action: str


class Capabilities(BaseModel):
    """What this server lets the agent do."""

    trunk: str
    caps: list[str] = Field(description="Capability specs bounding every view (OPS=PREFIX[;budget=N])")
    session_budget: int | None = Field(description="Effects all views of this server may still commit in total")
    session_used: int = Field(description="Effects committed through this server so far")
    propose_only: bool = Field(description="True: there is no commit tool; a person commits proposed views")


def settled_by(o: Operation) -> str:
    """Who settles an owed operation, in words a model can act on ('' when it is settled)."""
    if o.state in ("pending", "not_sent"):
        return (
            "the store's operator: `reel recover` sends it (nothing of it left the store), or "
            "`reel reconcile` gives it up"
        )
    if o.state != "unknown":
        return ""
    if o.effect.delivery == "blind":
        return (
            "the store's operator: inspects the target and records what happened with `reel reconcile`; "
            "nothing resends it automatically"
        )
    return f"the store's operator: `reel recover` establishes it with the target ({o.effect.delivery} delivery)"


def operation_state(o: Operation) -> OperationState:
    return OperationState(
        op=o.op,
        index=o.index,
        resource=o.effect.resource,
        delivery=o.effect.delivery,
        state=o.state,
        owed=o.state in ("pending", "not_sent", "unknown"),
        evidence=o.evidence,
        settled_by=settled_by(o),
        next_action=o.next_action,
    )


def commit_report(store: Store, result: CommitResult) -> CommitReport:
    """The commit as a result, never an error: the record stands whatever its effects' fates."""
    from reelstore.fleet.shared import record_operations

    if result.record is None:
        return CommitReport(
            committed=True,
            view=result.view,
            target=result.target,
            record=None,
            state="merged",
            do_not_queue_again=False,
            operations=[],
            summary="Committed into the parent view; its effects fire when the parent commits.",
        )
    trunk = result.drain.trunk if result.drain is not None else result.target[len(HEAD_PREFIX) :]
    ops = [operation_state(o) for o in record_operations(store.repo, trunk, result.record)]
    owed = [s for s in ops if s.owed]
    failed = [s for s in ops if s.state in ("failed", "absent")]
    record = result.record.hex()
    if owed:
        held = result.drain.held if result.drain is not None else None
        why = f" Draining is on hold ({held})." if held else ""
        are = "is" if len(owed) == 1 else "are"
        summary = (
            f"Committed: record {record} stands.{why} {plural(len(owed), 'effect')} {are} owed "
            f"({', '.join(s.op for s in owed)}): the store settles them, see settled_by. Do NOT queue them "
            "again in this or another view: that would send them twice. Ask the operation tool for their "
            "state later."
        )
        state: Literal["done", "owed", "failed"] = "owed"
    elif failed:
        summary = (
            f"Committed: record {record} stands. The target refused {plural(len(failed), 'effect')} "
            f"({', '.join(s.op for s in failed)}): final, they did not happen. Another attempt, if the task "
            "still needs one, is a new effect in a new view."
        )
        state = "failed"
    else:
        summary = f"Committed: record {record}; every effect succeeded."
        state = "done"
    return CommitReport(
        committed=True,
        view=result.view,
        target=result.target,
        record=record,
        state=state,
        do_not_queue_again=bool(owed),
        summary=summary,
        operations=ops,
    )


class SessionBudget:
    """Effects all views committed through one server may carry, counted across the server's life."""

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self.used = 0
        self._lock = threading.Lock()

    def check(self, more: int, what: str) -> None:
        """E013 if `more` effects would exceed the budget."""
        with self._lock:
            self._check(more, what)

    def _check(self, more: int, what: str) -> None:
        if self.limit is not None and self.used + more > self.limit:
            raise BudgetExhausted(
                f"{what} would exceed this server's session budget: {self.used} of "
                f"{plural(self.limit, 'effect')} already committed, {more} more asked; "
                "nothing was sent",
                budget=self.limit,
                used=self.used,
            )

    def reserve(self, n: int, what: str) -> None:
        with self._lock:
            self._check(n, what)
            self.used += n

    def release(self, n: int) -> None:
        with self._lock:
            self.used -= n


class ReelTools:
    """The tools of one server: a store, a trunk and the capabilities every view must stay within."""

    def __init__(self, store: Store, trunk: str, caps: Sequence[Capability], budget: SessionBudget) -> None:
        self.trunk = trunk
        self.caps = tuple(caps)
        self.budget = budget
        self._shared = store
        self._local = threading.local()
        self._lock: threading.Lock | None = None if store.repo.files.on_disk else threading.Lock()

    @property
    def store(self) -> Store:
        """This worker thread's store: its own `Repo` on the same directory, as another process would
        have, so threads never share one store's open transaction or write batch."""
        if self._lock is not None:
            return self._shared
        mine: Store | None = getattr(self._local, "store", None)
        if mine is None:
            assert self._shared.repo.path is not None  # a store on disk has its directory
            mine = self._local.store = Store(Repo.open(self._shared.repo.path))
        return mine

    async def call(self, fn: Callable[[], T]) -> T:
        """Run one verb in a worker thread; a ReelError becomes a tool error carrying its code."""

        def run() -> T:
            if self._lock is None:
                return fn()
            with self._lock:
                return fn()

        try:
            return await anyio.to_thread.run_sync(run)
        except ReelError as err:
            raise ToolError(f"{err.code}: {err.message}") from None

    def guard(self, view: str) -> None:
        """E009 unless view `view` belongs to this server's trunk and is no wider than its caps."""
        live = load_live(self.store.repo, view, settle=False)
        if live.trunk != self.trunk:
            raise BadInput(f"view {view!r} belongs to trunk {live.trunk!r}; this server serves {self.trunk!r}")
        admission.narrow(self.caps, admission.view_caps(self.store.repo, live.view))

    async def on_view(self, view: str, fn: Callable[[], T]) -> T:
        def run() -> T:
            self.guard(view)
            return fn()

        return await self.call(run)

    def fork(self, name: str, caps: list[str] | None) -> dict[str, Any]:
        requested = [Capability.parse(c) for c in caps] if caps else list(self.caps)
        narrowed = admission.narrow(self.caps, requested)
        self.store.fork(name, HEAD_PREFIX + self.trunk, narrowed)
        return self.store.status(name).to_json()

    def effect(
        self, view: str, adapter: str, op: HttpOp | FsOp, effect_class: str | None, key: str | None
    ) -> dict[str, Any]:
        want = "http" if isinstance(op, HttpOp) else "fs"
        if adapter != want:
            raise BadInput(f"adapter {adapter!r} takes an {adapter} op; this op has the {want} op's fields")
        store = self.store
        self.budget.check(len(store.status(view).effects) + 1, f"queueing another effect in view {view!r}")
        given = op.model_dump(by_alias=True, exclude_unset=True)
        # null means "not given", except as a JSON body, where it is the value null
        plain = {k: v for k, v in given.items() if v is not None or k == "json"}
        e = store.open_view(view).effect(adapter, plain, effect_class, key=key)
        return {
            "effect": e.id.hex(),
            "adapter": e.adapter,
            "class": e.effect_class,
            "resource": e.resource,
            "delivery": e.delivery,
            "key": key or "",
        }

    def commit(self, view: str, message: str, retry: int = 0) -> CommitReport:
        store = self.store
        n = len(store.status(view).effects)
        self.budget.reserve(n, f"committing view {view!r}")
        try:
            result = store.commit(view, message, check=False, retry=retry)
        except BaseException:
            if _exists(store, view):  # still live: the commit did not land, so nothing was counted
                self.budget.release(n)
            raise
        if result.record is None:
            self.budget.release(n)  # merged into a parent view: counted when that one commits
        return commit_report(store, result)

    def operation(self, op: str) -> OperationState:
        from reelstore.fleet.shared import find

        found = find(self.store.repo, op)
        if found.trunk != self.trunk:
            raise NotFound(f"no operation {op} on trunk {self.trunk!r}")
        return operation_state(found)

    def propose(self, view: str) -> Proposal:
        status = self.store.status(view)
        return Proposal(
            state="proposed",
            view=view,
            effects=len(status.effects),
            changes=len(status.changes),
            next_action=f"a person reviews it (`reel status {view}`, `reel diff {view}`), approves it "
            f"where a rule requires (`reel approve {view} --by NAME`, not the agent), and "
            f"commits it with `reel commit {view}`, or discards it with `reel abort {view}`",
        )


def _exists(store: Store, view: str) -> bool:
    try:
        store.open_view(view)
    except ReelError:
        return False
    return True


def _content(f: FileWrite) -> bytes:
    if (f.text is None) == (f.base64 is None):
        raise BadInput(f"{f.path}: give exactly one of text and base64")
    if f.text is not None:
        return f.text.encode("utf-8")
    try:
        return base64.b64decode(f.base64 or "", validate=True)
    except ValueError:
        raise BadInput(f"{f.path}: base64 content is not valid base64") from None


def _instructions(trunk: str, caps: Sequence[Capability], budget: SessionBudget, propose_only: bool) -> str:
    limits = "; ".join(c.spec() for c in caps) or "none"
    end = (
        "You cannot commit: `propose` leaves a view for a person, who reviews and commits it. "
        if propose_only
        else "`commit` lands the view and sends its effects; its result says which effects are owed: an owed "
        "effect is settled by the store's operator and must never be queued again. "
    )
    return (
        f"A reel store's trunk {trunk!r}. Fork a view, read and write files in it and queue effects (HTTP "
        "requests, file writes): nothing is sent until the view is committed; abort discards the view and "
        f"its effects never fire. {end}Your capabilities (every view is bounded by them): {limits}. "
        + (
            f"Session budget: at most {plural(budget.limit, 'effect')} committed through this server in total. "
            if budget.limit is not None
            else ""
        )
        + "The capabilities tool says the same, with what is used."
    )


def build_server(
    store: Store,
    trunk: str | None = None,
    caps: Iterable[Capability | str] | None = None,
    port: int = 8000,
    *,
    session_budget: int | None = None,
    propose_only: bool = False,
) -> FastMCP:
    """An MCP server over `store`'s trunk (default: the store's), bounded by `caps` (default: the trunk's,
    less every `secret` grant: an agent names no credential unless the server was started with one)
    and, if given, by `session_budget` effects committed in total; `propose_only` withholds `commit`.
    `port` is for streamable HTTP, always on 127.0.0.1."""
    trunk = trunk or store.repo.trunk
    store.repo.refs[HEAD_PREFIX + trunk]  # E001 now, not at the first tool call
    if session_budget is not None and session_budget < 0:
        raise BadInput(f"a session budget is a count of effects, not {session_budget}")
    bound = admission.trunk_caps(store.repo, trunk)
    chosen = (
        admission.without_secrets(bound)
        if caps is None
        else admission.narrow(bound, [c if isinstance(c, Capability) else Capability.parse(c) for c in caps])
    )
    budget = SessionBudget(session_budget)
    tools = ReelTools(store, trunk, chosen, budget)
    server = FastMCP(
        "reelstore", host="127.0.0.1", port=port, instructions=_instructions(trunk, chosen, budget, propose_only)
    )

    def tool(annotations: ToolAnnotations) -> Callable[[Callable[..., Awaitable[Any]]], Any]:
        return server.tool(annotations=annotations, structured_output=True)

    @tool(WRITE)
    async def fork(
        name: Annotated[str, Field(description="A new view name")],
        caps: Annotated[
            list[str] | None,
            Field(
                description="Capability specs OPS=PREFIX[;budget=N] narrowing the server's own; default: the server's"
            ),
        ] = None,
    ) -> dict[str, Any]:
        """Fork a new view NAME from the trunk. A capability wider than the server's is refused (E009).
        Returns the view's status."""
        return await tools.call(lambda: tools.fork(name, caps))

    @tool(READ)
    async def ls(
        view: ViewName, prefix: Annotated[str, Field(description="Only names under this prefix")] = ""
    ) -> list[dict[str, str]]:
        """Names under prefix in the view, with their object ids."""
        return await tools.on_view(
            view, lambda: [{"name": n, "id": h.hex()} for n, h in tools.store.open_view(view).ls(prefix)]
        )

    @tool(READ)
    async def get(
        view: ViewName, path: Annotated[str, Field(description="The file's name in the view")]
    ) -> dict[str, str]:
        """A file of the view: {"text"} when it is UTF-8, else {"base64"}."""
        data = await tools.on_view(view, lambda: tools.store.open_view(view).get(path))
        try:
            return {"path": path, "text": data.decode("utf-8")}
        except UnicodeDecodeError:
            return {"path": path, "base64": base64.b64encode(data).decode()}

    @tool(WRITE)
    async def put(
        view: ViewName, files: Annotated[list[FileWrite], Field(description="The files to write")]
    ) -> dict[str, str]:
        """Write several files into the view in one call; returns each path's object id."""

        def run() -> dict[str, str]:
            handle = tools.store.open_view(view)
            contents = [(f.path, _content(f)) for f in files]  # every file checked before any is written
            return {path: handle.put(path, data).hex() for path, data in contents}

        return await tools.on_view(view, run)

    @tool(WRITE)
    async def rm(view: ViewName, paths: Annotated[list[str], Field(description="Names to remove")]) -> list[str]:
        """Remove names from the view."""

        def run() -> list[str]:
            handle = tools.store.open_view(view)
            for p in paths:
                handle.rm(p)
            return paths

        return await tools.on_view(view, run)

    @tool(READ)
    async def diff(view: ViewName) -> list[dict[str, Any]]:
        """What the view changed since its base, name by name."""
        return await tools.on_view(view, lambda: [c.to_json() for c in tools.store.open_view(view).diff()])

    @tool(READ)
    async def status(view: ViewName) -> dict[str, Any]:
        """The view's base, changed names, pending effects and capabilities."""
        return await tools.on_view(view, lambda: tools.store.status(view).to_json())

    @tool(QUEUE)
    async def effect(
        view: ViewName,
        adapter: Annotated[Literal["http", "fs"], Field(description="http or fs; matches op's kind")],
        op: Annotated[
            HttpOp | FsOp,
            Field(description="The operation: an http request or an fs write/delete; unknown keys are refused"),
        ],
        effect_class: Annotated[
            Literal["B", "C"] | None,
            Field(description="Override the adapter's class (B: precondition re-checked at commit)"),
        ] = None,
        key: Annotated[
            str | None,
            Field(
                description="The task this effect does, e.g. refund:ticket-42: the same task queued "
                "again, in any view or after a restart, is refused instead of sent "
                "twice"
            ),
        ] = None,
    ) -> dict[str, Any]:
        """Queue a side effect in the view; it fires only if the view is committed. Give a task key for
        anything that must happen once per task."""
        return await tools.on_view(view, lambda: tools.effect(view, adapter, op, effect_class, key))

    if propose_only:

        @tool(WRITE)
        async def propose(view: ViewName) -> Proposal:
            """Leave the view for a person to review and commit; nothing is sent by this call."""
            return await tools.on_view(view, lambda: tools.propose(view))
    else:

        @tool(FIRE)
        async def commit(
            view: ViewName,
            message: Annotated[str, Field(description="The record's message")] = "",
            retry: Annotated[
                int,
                Field(
                    ge=0,
                    le=100,
                    description=(
                        "If another store wins the trunk's remote first, fetch and try again at most this "
                        "often (a trunk that tracks a remote)"
                    ),
                ),
            ] = 0,
        ) -> CommitReport:
            """Commit the view into the trunk, then send its effects in order. The result is not an error
            when effects are owed: the commit stands; never queue owed effects again."""
            return await tools.on_view(view, lambda: tools.commit(view, message, retry))

    @tool(DISCARD)
    async def abort(view: ViewName) -> list[str]:
        """Discard the view (and its live descendants): none of their effects will ever fire."""
        return await tools.on_view(view, lambda: tools.store.abort(view))

    @tool(READ)
    async def views() -> list[dict[str, Any]]:
        """The live views of this server's trunk that are within its capabilities."""

        def run() -> list[dict[str, Any]]:
            out = []
            for row in tools.store.views():
                try:
                    tools.guard(row.name)
                except ReelError:
                    continue
                out.append(row.to_json())
            return out

        return await tools.call(run)

    @tool(READ)
    async def log(
        limit: Annotated[int, Field(ge=1, le=1000, description="How many records")] = 20,
    ) -> list[dict[str, Any]]:
        """The trunk's newest records, with their effects' drain outcomes."""
        return await tools.call(lambda: [e.to_json() for e in tools.store.log(trunk, limit)])

    @tool(READ)
    async def ops(
        unresolved: Annotated[bool, Field(description="Only pending and unknown ones")] = True,
    ) -> list[dict[str, Any]]:
        """Operations of committed records, with their state and next step."""
        return await tools.call(lambda: [o.to_json() for o in tools.store.ops(unresolved) if o.trunk == trunk])

    @tool(READ)
    async def operation(
        op: Annotated[str, Field(description="Operation id (op_…) from a commit result")],
    ) -> OperationState:
        """One operation's state now: whether it is still owed, and who settles it."""
        return await tools.call(lambda: tools.operation(op))

    @tool(READ)
    async def capabilities() -> Capabilities:
        """What this server lets you do: its capabilities, session budget and whether you may commit."""
        return Capabilities(
            trunk=trunk,
            caps=[c.spec() for c in chosen],
            session_budget=budget.limit,
            session_used=budget.used,
            propose_only=propose_only,
        )

    _forbid_unknown_arguments(server)
    return server


def _forbid_unknown_arguments(server: FastMCP) -> None:
    """Every tool refuses an argument it does not know (a misspelt `effect_clas` would otherwise be
    dropped silently) and its input schema says so (`additionalProperties: false`)."""
    for t in server._tool_manager.list_tools():
        model = t.fn_metadata.arg_model
        model.model_config["extra"] = "forbid"
        model.model_rebuild(force=True)
        t.parameters = model.model_json_schema(by_alias=True)


def serve_http(server: FastMCP, token: str) -> None:
    """Serve streamable HTTP on the server's loopback port; every request must carry
    `Authorization: Bearer TOKEN` (401 otherwise), so another local user cannot drive the agent's tools."""
    import uvicorn

    app = server.streamable_http_app()
    want = f"Bearer {token}".encode()

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            got = dict(scope.get("headers") or ()).get(b"authorization", b"")
            if not hmac.compare_digest(got, want):
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [(b"content-type", b"text/plain"), (b"www-authenticate", b"Bearer")],
                    }
                )
                await send({"type": "http.response.body", "body": b"a bearer token is required\n"})
                return
        await app(scope, receive, send)

    config = uvicorn.Config(
        guarded, host=server.settings.host, port=server.settings.port, log_level=server.settings.log_level.lower()
    )
    uvicorn.Server(config).run()
