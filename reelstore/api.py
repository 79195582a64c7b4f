"""The Python API: a `Store` and its views, the same verbs the `reel` command line runs.

    from reelstore import Store

    store = Store.open(".")
    with store.view("attempt-1", caps=["read,write=docs/", "fire_c=fs:out/"]) as v:
        v.put("docs/plan.md", b"...")
        v.effect("fs", {"action": "write", "path": "out/plan.md", "content": "..."})
    # clean exit: committed (and drained); an exception inside the block: aborted, nothing fires.

A commit that drains raises unless every effect succeeded: `OutcomeUnknown` (E011) if one's outcome
cannot be established, `EffectFailed` (E017) if one was refused or not sent. Both carry `result` (the
CommitResult: the commit itself stands), `ops` and `next_action`. Pass `check=False` to get the
result back instead and read `result.drain` yourself.

Every method is a thin wrapper over `reelstore.kernel.verbs`; the command line calls these same methods.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from reelstore.adapters.http_request import HttpRequest
from reelstore.backend import op_log
from reelstore.backend.config import Config
from reelstore.backend.repo import DEFAULT_TRUNK, Repo
from reelstore.errors import BadInput, EffectFailed, NotFound, OutcomeUnknown, ReelError
from reelstore.kernel import inspection
from reelstore.kernel import verbs as kernel
from reelstore.kernel.history import LogEntry, log
from reelstore.kernel.inspection import NameChange, ViewStatus, ViewSummary
from reelstore.kernel.transaction import Transaction
from reelstore.kernel.undo import UndoResult, undo
from reelstore.kernel.views import initiator, load_live
from reelstore.objects import Capability, Effect, Hash
from reelstore.objects.ref import view_ref
from reelstore.sync import verbs as doors

if TYPE_CHECKING:  # imported where used: most callers never need gc, recovery or dulwich
    from reelstore.backend.secrets import SecretStore
    from reelstore.backend.upkeep import GcReport
    from reelstore.drain.hold import Hold
    from reelstore.drain.ops import Operation
    from reelstore.drain.recovery import RecoveryReport
    from reelstore.fleet.worker import WorkerReport
    from reelstore.kernel.approval import Standing
    from reelstore.objects import Approval, Finding
    from reelstore.sync import FetchResult, PushResult


def _caps(caps: Iterable[Capability | str] | None) -> list[Capability] | None:
    if caps is None:
        return None
    return [c if isinstance(c, Capability) else Capability.parse(c) for c in caps]


class ViewHandle:
    """A live view by name. Each call re-reads the view's ref, so handles never go stale.

    A handle from `Store.view` gathers its puts, removes and effects in one transaction that lands
    (one view object, one ref update, one fsync of the objects) when the block ends or at `flush()`;
    any other handle lands each call on its own.

    A handle may be shared by threads (parallel tool calls): its calls run one at a time, and every
    call lands or raises. The gathered transaction's write batch travels with the handle, so a put
    made in one thread and landed by another names an object that was written.
    """

    def __init__(self, store: Store, name: str, *, batched: bool = False) -> None:
        self.store = store
        self.name = name
        self.batched = batched
        self._tx: Transaction | None = None
        self._carried: Any = None
        """The open transaction's write batch, between calls (`ObjectStore.detach_batch`)."""
        self._owns_batch = True
        self._lock = threading.RLock()
        self.result: kernel.CommitResult | None = None
        """Set by this handle's commit (also the one `Store.view` makes on a clean exit), before it raises."""

    @contextmanager
    def _turn(self) -> Iterator[None]:
        """One call at a time; the transaction's batch is this thread's for the call's duration."""
        with self._lock:
            objects = self.repo.objects
            objects.attach_batch(self._carried)  # E007, and the batch stays with the handle, if this thread has one
            self._carried = None
            try:
                yield
            finally:
                if self._tx is not None and self._tx.state == "open" and self._owns_batch:
                    self._carried = objects.detach_batch()

    def _open_tx(self) -> Transaction | None:
        if self.batched and self._tx is None:
            # A thread already inside a batch of its own keeps it: the transaction joins that batch
            # and cannot be carried to another thread.
            self._owns_batch = not self.repo.objects.in_batch
            self._tx = kernel.transaction(self.repo, self.name)
        return self._tx

    def flush(self) -> None:
        """Land what this handle has gathered so far (nothing to do outside a `Store.view` block)."""
        with self._turn():
            tx, self._tx = self._tx, None
            if tx is not None:
                tx.commit()

    def discard(self) -> None:
        """Drop what this handle has gathered and not flushed."""
        with self._turn():
            tx, self._tx = self._tx, None
            if tx is not None:
                tx.abort()

    @property
    def repo(self) -> Repo:
        return self.store.repo

    @property
    def live(self) -> bool:
        """False once the view was committed or aborted (by this handle or anyone else)."""
        return self.repo.refs.get(view_ref(self.name)) is not None

    def put(self, path: str, data: bytes | str | BinaryIO) -> Hash:
        """Write `data` (str is UTF-8 encoded; a binary file is read to its end, streamed) under
        `path`; returns the content id (a blob, or a chunk list for content over 4 MiB)."""
        with self._turn():
            tx = self._open_tx()
            if isinstance(data, (bytes, str)):
                raw = data.encode("utf-8") if isinstance(data, str) else data
                return tx.put(path, raw) if tx is not None else kernel.put(self.repo, self.name, path, raw)
            if tx is not None:
                return tx.put_stream(path, data)[0]
            return kernel.put_stream(self.repo, self.name, path, data)[0]

    def get(self, path: str) -> bytes:
        """The whole content under `path` (for content too large to hold, use `read`)."""
        with self._turn():
            if self._tx is not None:
                return self._tx.get(path)
            return kernel.get(self.repo, self.name, path)

    def read(self, path: str) -> Iterator[bytes]:
        """The content under `path` piece by piece, with bounded memory whatever its size. What the
        handle gathered lands first: the pieces are read after the call returns, in any thread."""
        with self._turn():
            self.flush()
            return kernel.read(self.repo, self.name, path)

    def rm(self, path: str) -> None:
        with self._turn():
            tx = self._open_tx()
            if tx is not None:
                tx.rm(path)
            else:
                kernel.rm(self.repo, self.name, path)

    def ls(self, prefix: str = "") -> list[tuple[str, Hash]]:
        with self._turn():
            if self._tx is not None:
                return self._tx.ls(prefix)
            return kernel.ls(self.repo, self.name, prefix)

    def effect(
        self,
        adapter: str,
        op: Mapping[str, Any] | HttpRequest,
        effect_class: str | None = None,
        version_ref: Mapping[str, Any] | None = None,
        *,
        supersedes: str | None = None,
        approved_by: str = "",
        key: str | None = None,
    ) -> Effect:
        """Queue a Class B or C effect; it fires only if this view's changes reach a trunk. `op` is the
        adapter's operation map, or an `HttpRequest` for the http adapter. `supersedes` makes it a fresh
        attempt at an earlier operation, which `approved_by` (not its initiator) must authorise. `key`
        names the task (say "refund:ticket-42"): the operation id derives from (trunk, key), so the task
        queued again, in any view, store or process, is refused (E008) instead of done twice."""
        if isinstance(op, HttpRequest):
            op = op.to_op()
        with self._turn():
            link = None
            if supersedes is not None:
                from reelstore.drain.operator import supersede_link
                from reelstore.fleet.shared import source

                view = load_live(self.repo, self.name, settle=False).view
                link = supersede_link(self.repo, supersedes, approved_by, initiator(self.repo, view), source(self.repo))
            tx = self._open_tx()
            if tx is not None:
                return tx.effect(adapter, op, effect_class, version_ref, link, key)
            return kernel.effect(self.repo, self.name, adapter, op, effect_class, version_ref, link, key)

    def status(self) -> ViewStatus:
        """This view's base, changes, pending effects (in firing order) and capabilities."""
        with self._turn():
            self.flush()
            return inspection.status(self.repo, self.name)

    def diff(self) -> list[NameChange]:
        """One entry per name this view changed against its base, in name order."""
        with self._turn():
            self.flush()
            return inspection.diff(self.repo, self.name)

    def fork(
        self, name: str, caps: Iterable[Capability | str] | None = None, boundary: str | None = None
    ) -> ViewHandle:
        """A child of this view (isolated by default: its commit merges into this view)."""
        with self._turn():
            self.flush()
            return self.store.fork(name, source=f"refs/views/{self.name}", caps=caps, boundary=boundary)

    def commit(self, message: str = "", check: bool = True) -> kernel.CommitResult:
        """Commit this view (what the handle gathered lands first); raises OutcomeUnknown / EffectFailed
        unless every effect succeeded (the commit stands either way; `check=False` returns the result
        without raising). Another thread's call on this handle waits until the commit is done (and
        then raises E008: the view is committed)."""
        with self._turn():
            self.flush()
            self.result = doors.commit(self.repo, self.name, message)
        return checked(self.result, check)

    def abort(self) -> list[str]:
        with self._turn():
            self.discard()
            return self.store.abort(self.name)

    def http_client(self, package: str = "httpx", **kwargs: Any) -> Any:
        """An `httpx.Client` that sends read-like requests (safe methods, model calls) at once and queues
        every other request in this view as an http effect, answered 202 (`OpenAI(http_client=…)`).
        `package="httpx2"` makes an `httpx2.Client`, for SDKs built on it; `kwargs` go to the client.
        Needs httpx (`reelstore[http]`)."""
        from reelstore.capture.httpx_client import client

        return client(self, package, **kwargs)

    def __repr__(self) -> str:
        return f"ViewHandle({self.name!r})"


class StoreConfig:
    """`reel config` from code: the store's config keys (`section.key` or `section.subsection.key`),
    read and written through the same parser and the same checks as the command (E014 for a malformed
    key or value). Service rules are `service.NAME.*`, TLS trust `http.trust`, the send timeout
    `http.timeout`; docs/config.md lists every key the store reads, with its default."""

    def __init__(self, repo: Repo) -> None:
        self._config = repo.config

    def _fresh(self) -> Config:
        """The store's config as the file holds it now: another process (`reel config`) may have
        changed it since this store opened, and a write must not put back what it replaced. The
        store's own reads see the new values too."""
        config = self._config
        if config.path is not None:
            config.lines = Config(config.path).lines
        return config

    def get(self, key: str, default: str | None = None) -> str | None:
        """The key's (last) value, or `default` if it is unset."""
        return self._fresh().get(key, default)

    def get_all(self, key: str) -> list[str]:
        """Every value of a multi-valued key (`trunk.main.cap`, `secrets.header`), in order."""
        return self._fresh().get_all(key)

    def __getitem__(self, key: str) -> str:
        """The key's (last) value; E001 if it is unset, as `reel config --get`."""
        value = self.get(key)
        if value is None:
            raise NotFound(f"config key {key} is not set", key=key)
        return value

    def __setitem__(self, key: str, value: str) -> None:
        self.set(key, value)

    def __contains__(self, key: str) -> bool:
        return bool(self.get_all(key))

    def set(self, key: str, value: str) -> None:
        """Set the key, replacing its last value (`reel config KEY VALUE`)."""
        self._fresh().set(key, value)

    def add(self, key: str, value: str) -> None:
        """Add one more value to the key (`reel config --add`)."""
        self._fresh().set(key, value, add=True)

    def unset(self, key: str) -> int:
        """Remove the key (`reel config --unset`): E001 if it is unset, E014 if it has several values."""
        values = self.get_all(key)
        if not values:
            raise NotFound(f"config key {key} is not set", key=key)
        if len(values) > 1:
            raise BadInput(f"config key {key} has {len(values)} values; use unset_all", key=key)
        return self._config.unset(key)

    def unset_all(self, key: str) -> int:
        """Remove every value of the key; how many there were."""
        return self._fresh().unset(key)

    def items(self) -> list[tuple[str, str]]:
        """Every (key, value), in file order (`reel config --list`)."""
        return self._fresh().items()


class Store:
    """A reel store on disk (or in memory). Open one with `Store.open`, create one with `Store.init`."""

    def __init__(self, repo: Repo) -> None:
        self.repo = repo

    @classmethod
    def open(cls, path: Path | str | None = None) -> Store:
        """The store at or above `path` (default: REEL_DIR, then the working directory upwards)."""
        return cls(Repo.discover(Path(path) if path is not None else None))

    @classmethod
    def init(cls, path: Path | str = ".", trunk: str = DEFAULT_TRUNK, *, backend: str | None = None) -> Store:
        """Create a store in `path`; with `backend` (a postgresql:// URL) its objects, refs and operation
        log live in that database, and a database that already holds the trunk is joined."""
        return cls(Repo.init(path, trunk, backend, field="backend"))

    @property
    def config(self) -> StoreConfig:
        """The store's config keys, read and set as `reel config` does: `store.config["http.timeout"] = "10"`."""
        return StoreConfig(self.repo)

    @property
    def secrets(self) -> SecretStore:
        """Credentials effects refer to as `{"$secret": NAME}`: `store.secrets.put(NAME, VALUE)`."""
        from reelstore.backend.secrets import secret_store

        return secret_store(self.repo)

    @classmethod
    def open_or_init(cls, path: Path | str = ".", trunk: str = DEFAULT_TRUNK) -> Store:
        """The store at `path` (its `.reel`, or `path` itself if it is one), created there if there is none.
        Unlike `open`, it never walks up to a parent's store."""
        where = Path(path)
        for candidate in (where / ".reel", where):
            if (candidate / "config").is_file() and (candidate / "objects").is_dir():
                return cls(Repo.open(candidate))
        return cls.init(where, trunk)

    @classmethod
    def clone(cls, url: str, directory: Path | str) -> tuple[Store, FetchResult]:
        """A new store at `directory` from the git remote `url` (see reelstore.sync)."""
        from reelstore import sync

        repo, result = sync.clone(url, directory)
        return cls(repo), result

    @classmethod
    def memory(cls, trunk: str = DEFAULT_TRUNK) -> Store:
        """A store that lives only in this process (for tests and embedding)."""
        return cls(Repo.memory(trunk))

    def fork(
        self,
        name: str,
        source: str | None = None,
        caps: Iterable[Capability | str] | None = None,
        boundary: str | None = None,
    ) -> ViewHandle:
        """Fork view `name` from a trunk (default: the store's) or a view."""
        kernel.fork(self.repo, name, source, _caps(caps), boundary)
        return ViewHandle(self, name)

    def open_view(self, name: str) -> ViewHandle:
        """A handle on an existing live view (E001 / E008 if there is none)."""
        load_live(self.repo, name, settle=False)
        return ViewHandle(self, name)

    @contextmanager
    def view(
        self,
        name: str,
        source: str | None = None,
        caps: Iterable[Capability | str] | None = None,
        boundary: str | None = None,
        message: str = "",
        check: bool = True,
    ) -> Iterator[ViewHandle]:
        """Fork a view for the block: its writes gather in one transaction; commit on clean exit (the
        transaction lands first), abort if the block raises (nothing it gathered becomes visible). The
        commit raises as `ViewHandle.commit` does (the handle's `result` is set first) unless
        `check=False`."""
        kernel.fork(self.repo, name, source, _caps(caps), boundary)
        handle = ViewHandle(self, name, batched=True)
        try:
            yield handle
        except BaseException:
            handle.discard()
            if handle.live:
                handle.abort()
            raise
        handle.flush()
        if handle.live:
            handle.commit(message, check=check)

    def views(self) -> list[ViewSummary]:
        """Every live view: name, id, parent, boundary, counts of changes and effects, and the remote it
        is bound to (its one commit point), if any."""
        return inspection.views(self.repo)

    def commit(
        self,
        name: str,
        message: str = "",
        fence: Callable[[str, Hash, Hash], None] | None = None,
        check: bool = True,
        remote: str | None = None,
        retry: int = 0,
    ) -> kernel.CommitResult:
        """Commit view `name`; raises as `ViewHandle.commit` does unless `check=False`. `remote` is
        `commit --remote`: the record first wins that remote's trunk by compare-and-swap; by default
        the remote the trunk tracks (a clone's origin), as every door does (`sync.verbs.commit`).
        `retry` is `commit --retry`: after a lost race there (E015), fetch and try again, at most that often."""
        return checked(doors.commit(self.repo, name, message, remote=remote, fence=fence, retry=retry), check)

    def abort(self, name: str) -> list[str]:
        """Abort view `name` and its live descendants; those bound to a remote lose their copy there
        first, so no other store can commit them afterwards."""
        return doors.abort(self.repo, name)

    def status(self, name: str) -> ViewStatus:
        """View `name`'s base, changes, pending effects (in firing order) and capabilities."""
        return inspection.status(self.repo, name)

    def log(self, trunk: str | None = None, limit: int | None = None) -> list[LogEntry]:
        """The trunk's records, newest first, each with its effects' drain outcomes."""
        return log(self.repo, trunk or self.repo.trunk, limit)

    def handle(self, name: str) -> ViewHandle:
        return ViewHandle(self, name)

    def op_log(self, limit: int | None = None) -> list[op_log.Operation]:
        """The store's operations (each verb that moved refs, as `reel op log`), newest first."""
        return list(reversed(self.repo.ops.operations()))[:limit]

    def undo(self) -> UndoResult:
        """Revert the newest operation's refs by compare-and-swap, as `reel undo` (E002, E014 or E001
        with nothing changed when it cannot)."""
        return undo(self.repo)

    # maintenance and the operator surface, as `reel gc`, `ops`, `reconcile`, `recover`, `hold`, `release`

    def gc(self, prune: str | None = None, *, dry_run: bool = False) -> GcReport:
        """Mark from every ref, pack, and delete unreachable objects older than `prune` (default
        gc.pruneExpire; "now" deletes every unreachable one, "never" none)."""
        from reelstore.maintenance.gc import gc

        return gc(self.repo, prune, dry_run=dry_run)

    def ops(self, unresolved: bool = False) -> list[Operation]:
        """The operations committed records owe: state, evidence and the next action for each."""
        from reelstore.fleet.shared import list_ops

        return list_ops(self.repo, unresolved)

    def reconcile(
        self, op: str, outcome: str, evidence: str, observer: str, *, source: str = "", scope: str = ""
    ) -> tuple[Operation, Finding]:
        """Settle an unknown operation with an operator's attributed evidence (`succeeded` or
        `absent`, where the adapter's evidence rule allows absence); nothing is sent."""
        from reelstore.fleet.shared import reconcile

        return reconcile(self.repo, op, outcome, evidence, observer, source=source, scope=scope)

    def drain_worker(
        self, *, once: bool = False, lease: float | None = None, name: str | None = None, trunk: str | None = None
    ) -> WorkerReport:
        """Drain a shared Postgres store's outbox as one worker (as `reel drain --worker`): claim each
        owed effect with a lease of `lease` seconds (default config drain.lease, else 30), journal the
        intent in its row, send, settle; take over rows whose worker's lease ran out, by tier. `once`:
        what is owed now, then return; else wait for commits (LISTEN) until interrupted."""
        from reelstore.fleet.worker import work

        return work(self.repo, once=once, lease_s=lease, name=name, trunk=trunk)

    def recover(self) -> RecoveryReport:
        """Fence older drainers with a new epoch and resume every unfinished drain, per delivery tier."""
        from reelstore.fleet.shared import recover

        return recover(self.repo)

    def hold(self, why: str, by: str = "") -> Hold:
        """Stop all effect admission and draining until `release`."""
        from reelstore.drain import hold

        return hold.hold(self.repo, why, by)

    def release(self) -> Hold | None:
        from reelstore.drain import hold

        return hold.release(self.repo)

    # approvals

    def approve(self, name: str, by: str, note: str = "", expect: Hash | None = None) -> Approval:
        """Record `by`'s approval of view `name`'s pending effects and names exactly as they are now; a
        later change to the view voids it. E009 if `by` (or this store's principal) started the view or
        queued one of its effects; E002 if `expect` (the effects id reviewed) is no longer what it holds."""
        from reelstore.kernel import approval

        return approval.approve(self.repo, name, by, note, expect)

    def reject(self, name: str, by: str, note: str = "", expect: Hash | None = None) -> Approval:
        """Record `by`'s refusal of view `name` as it is now: its commit waits for a change and new approvals."""
        from reelstore.kernel import approval

        return approval.reject(self.repo, name, by, note, expect)

    def awaiting(self) -> list[Standing]:
        """The live views whose effects wait for approval: what each rule needs, who approved, since when."""
        from reelstore.kernel import approval

        return approval.awaiting(self.repo)

    # sync

    def push(self, remote: str = "origin", refs: list[str] | None = None) -> PushResult:
        from reelstore import sync

        return sync.push(self.repo, remote, refs)

    def fetch(self, remote: str = "origin") -> FetchResult:
        from reelstore import sync

        return sync.fetch(self.repo, remote)


def checked(result: kernel.CommitResult, check: bool = True) -> kernel.CommitResult:
    """`result`, after raising OutcomeUnknown / EffectFailed (carrying it) if an effect did not succeed."""
    if check and result.drain is not None:
        result.drain.check(result)
    return result


__all__: Sequence[str] = (
    "EffectFailed",
    "HttpRequest",
    "OutcomeUnknown",
    "ReelError",
    "Store",
    "StoreConfig",
    "ViewHandle",
)
