"""The asyncio API: `AsyncStore` and `AsyncViewHandle`, the same verbs as `Store` as coroutines.

    store = AsyncStore.open_or_init("shop")
    async with store.view("attempt-1") as v:
        await v.put("notes/plan.txt", "refund order 42\\n")
        await v.effect("http", HttpRequest("POST", "https://api.example.com/refund", json={"order": 42}))
    # clean exit: committed and drained, without blocking the event loop; an exception: aborted.

Every verb runs in a worker thread of the store's own executor (a constructor parameter; by default
a small thread pool of `WORKERS` threads), never asyncio's default one: fifty drains waiting on a slow
target then wait for these threads, not for the ones the application's own `asyncio.to_thread`
calls need. Threads and stores: a `Store` (its repo, its caches) is used by one thread at a time. For a store on
disk, each worker thread opens its own `Store` on the same directory, exactly as separate processes
do: the ref compare-and-swap and the drain's locks keep them consistent, so many views can commit
concurrently. An in-memory store has one `Store`, and its verbs run one at a time under a lock.

Cancellation never interrupts a verb: cancelling a task that awaits `commit` stops the waiting, but
the commit, its drain and every journal append run to their end in the worker thread (an effect is
never left half-journaled by a cancel). `close()` waits for such verbs (the interpreter waits for
them at exit too); the event loop's own shutdown does not, as the executor is not its default one.
Exceptions are the synchronous API's, raised in the caller.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Mapping
from concurrent.futures import Executor, ThreadPoolExecutor
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from reelstore.adapters.http_request import HttpRequest
from reelstore.api import Store, ViewHandle
from reelstore.backend import op_log
from reelstore.backend.repo import DEFAULT_TRUNK
from reelstore.kernel import verbs as kernel
from reelstore.kernel.history import LogEntry
from reelstore.kernel.inspection import NameChange, ViewStatus, ViewSummary
from reelstore.kernel.undo import UndoResult
from reelstore.objects import Capability, Effect, Hash

if TYPE_CHECKING:  # as in api.py: loaded by the calls that need them
    from reelstore.backend.upkeep import GcReport
    from reelstore.drain.ops import Operation
    from reelstore.drain.recovery import RecoveryReport
    from reelstore.fleet.worker import WorkerReport
    from reelstore.kernel.approval import Standing
    from reelstore.objects import Approval

T = TypeVar("T")


WORKERS = 4
"""Threads of an `AsyncStore`'s own executor when none is given: verbs beyond that many wait their turn."""


class AsyncStore:
    """A store whose verbs are coroutines. Make one with `open`, `init`, `open_or_init` or `memory`.

    `executor` runs the verbs (by default a thread pool of `WORKERS` threads that this store owns and
    `close` shuts down); pass your own to size it, or to share one between stores."""

    def __init__(self, store: Store, executor: Executor | None = None) -> None:
        self._store = store
        self._path = store.repo.path
        self._local = threading.local()
        self._lock = threading.Lock() if self._path is None else None
        self._owned = executor is None
        self.executor: Executor = executor or ThreadPoolExecutor(WORKERS, thread_name_prefix="reelstore")

    def close(self) -> None:
        """Shut down the executor this store made (one passed in is the caller's to shut down)."""
        if self._owned:
            self.executor.shutdown(wait=True)

    @classmethod
    def open(cls, path: Path | str | None = None, executor: Executor | None = None) -> AsyncStore:
        return cls(Store.open(path), executor)

    @classmethod
    def init(
        cls,
        path: Path | str = ".",
        trunk: str = DEFAULT_TRUNK,
        executor: Executor | None = None,
        *,
        backend: str | None = None,
    ) -> AsyncStore:
        return cls(Store.init(path, trunk, backend=backend), executor)

    @classmethod
    def open_or_init(
        cls, path: Path | str = ".", trunk: str = DEFAULT_TRUNK, executor: Executor | None = None
    ) -> AsyncStore:
        return cls(Store.open_or_init(path, trunk), executor)

    @classmethod
    def memory(cls, trunk: str = DEFAULT_TRUNK, executor: Executor | None = None) -> AsyncStore:
        return cls(Store.memory(trunk), executor)

    @property
    def store(self) -> Store:
        """The synchronous store of the calling thread."""
        if self._path is None:
            return self._store
        mine: Store | None = getattr(self._local, "store", None)
        if mine is None:
            mine = self._local.store = Store.open(self._path)
        return mine

    async def run(self, fn: Callable[[Store], T]) -> T:
        """Run `fn(store)` in a thread of this store's executor with that thread's `Store`; the result or
        its exception. The caller's context variables go along, as with `asyncio.to_thread`."""

        def call() -> T:
            if self._lock is None:
                return fn(self.store)
            with self._lock:
                return fn(self.store)

        context = contextvars.copy_context()
        loop = asyncio.get_running_loop()
        return await asyncio.shield(loop.run_in_executor(self.executor, context.run, call))

    async def fork(
        self,
        name: str,
        source: str | None = None,
        caps: Iterable[Capability | str] | None = None,
        boundary: str | None = None,
    ) -> AsyncViewHandle:
        caps = list(caps) if caps is not None else None
        await self.run(lambda s: s.fork(name, source, caps, boundary))
        return AsyncViewHandle(self, name)

    def handle(self, name: str) -> AsyncViewHandle:
        return AsyncViewHandle(self, name)

    @asynccontextmanager
    async def view(
        self,
        name: str,
        source: str | None = None,
        caps: Iterable[Capability | str] | None = None,
        boundary: str | None = None,
        message: str = "",
        check: bool = True,
    ) -> AsyncIterator[AsyncViewHandle]:
        """Fork a view for the block: commit on clean exit, abort if the block raises (or is cancelled).
        The commit raises EffectFailed / OutcomeUnknown as `Store.view`'s does, unless `check=False`."""
        handle = await self.fork(name, source, caps, boundary)
        try:
            yield handle
        except BaseException:
            if await handle.live():
                await handle.abort()
            raise
        if await handle.live():
            await handle.commit(message, check=check)

    async def commit(
        self, name: str, message: str = "", check: bool = True, remote: str | None = None, retry: int = 0
    ) -> kernel.CommitResult:
        """`Store.commit`: with `remote`, fenced on that remote's trunk; `retry` tries again after a lost race."""
        return await self.run(lambda s: s.commit(name, message, check=check, remote=remote, retry=retry))

    async def abort(self, name: str) -> list[str]:
        return await self.run(lambda s: s.abort(name))

    async def status(self, name: str) -> ViewStatus:
        return await self.run(lambda s: s.status(name))

    async def views(self) -> list[ViewSummary]:
        return await self.run(lambda s: s.views())

    async def log(self, trunk: str | None = None, limit: int | None = None) -> list[LogEntry]:
        return await self.run(lambda s: s.log(trunk, limit))

    async def ops(self, unresolved: bool = False) -> list[Operation]:
        return await self.run(lambda s: s.ops(unresolved))

    async def op_log(self, limit: int | None = None) -> list[op_log.Operation]:
        return await self.run(lambda s: s.op_log(limit))

    async def undo(self) -> UndoResult:
        return await self.run(lambda s: s.undo())

    async def drain_worker(
        self, *, once: bool = False, lease: float | None = None, name: str | None = None, trunk: str | None = None
    ) -> WorkerReport:
        return await self.run(lambda s: s.drain_worker(once=once, lease=lease, name=name, trunk=trunk))

    async def recover(self) -> RecoveryReport:
        return await self.run(lambda s: s.recover())

    async def gc(self, prune: str | None = None, *, dry_run: bool = False) -> GcReport:
        return await self.run(lambda s: s.gc(prune, dry_run=dry_run))

    async def approve(self, name: str, by: str, note: str = "", expect: Hash | None = None) -> Approval:
        return await self.run(lambda s: s.approve(name, by, note, expect))

    async def reject(self, name: str, by: str, note: str = "", expect: Hash | None = None) -> Approval:
        return await self.run(lambda s: s.reject(name, by, note, expect))

    async def awaiting(self) -> list[Standing]:
        return await self.run(lambda s: s.awaiting())


class AsyncViewHandle:
    """A live view by name; every method is a coroutine over `ViewHandle`'s verb of the same name."""

    def __init__(self, store: AsyncStore, name: str) -> None:
        self.store = store
        self.name = name
        self.result: kernel.CommitResult | None = None
        """Set when `AsyncStore.view`'s block exits cleanly and commits."""

    def _on(self, fn: Callable[[ViewHandle], T]) -> Coroutine[Any, Any, T]:
        return self.store.run(lambda s: fn(s.handle(self.name)))

    async def live(self) -> bool:
        return bool(await self._on(lambda h: h.live))

    async def put(self, path: str, data: bytes | str) -> Hash:
        return await self._on(lambda h: h.put(path, data))

    async def get(self, path: str) -> bytes:
        return await self._on(lambda h: h.get(path))

    async def rm(self, path: str) -> None:
        await self._on(lambda h: h.rm(path))

    async def ls(self, prefix: str = "") -> list[tuple[str, Hash]]:
        return await self._on(lambda h: h.ls(prefix))

    async def effect(
        self,
        adapter: str,
        op: Mapping[str, Any] | HttpRequest,
        effect_class: str | None = None,
        version_ref: Mapping[str, Any] | None = None,
        *,
        key: str | None = None,
    ) -> Effect:
        """`ViewHandle.effect`; `key` is the task key."""
        return await self._on(lambda h: h.effect(adapter, op, effect_class, version_ref, key=key))

    async def status(self) -> ViewStatus:
        return await self._on(lambda h: h.status())

    async def diff(self) -> list[NameChange]:
        return await self._on(lambda h: h.diff())

    async def commit(self, message: str = "", check: bool = True) -> kernel.CommitResult:
        """Commit; `result` is set before EffectFailed / OutcomeUnknown is raised (unless `check=False`)."""

        def run(h: ViewHandle) -> kernel.CommitResult:
            try:
                return h.commit(message, check=check)
            finally:
                self.result = h.result

        return await self._on(run)

    async def abort(self) -> list[str]:
        return await self._on(lambda h: h.abort())

    async def fork(
        self, name: str, caps: Iterable[Capability | str] | None = None, boundary: str | None = None
    ) -> AsyncViewHandle:
        return await self.store.fork(name, f"refs/views/{self.name}", caps, boundary)

    def http_client(self, package: str = "httpx", **kwargs: Any) -> Any:
        """`ViewHandle.http_client`'s twin: an `httpx.AsyncClient` (`AsyncOpenAI(http_client=…)`)."""
        from reelstore.capture.httpx_client import async_client

        return async_client(self, package, **kwargs)

    def __repr__(self) -> str:
        return f"AsyncViewHandle({self.name!r})"
