"""The reel protocol's verbs over a store: Class A writes, effect admission, commit and abort (fork is
`kernel.fork`'s, re-exported here).

Every change is a new immutable view object and a compare-and-swap of the view's ref, so concurrent
writers never lose an update and a reader always sees a whole view. A commit has exactly one commit
point, the CAS of its target: the trunk ref (the record names the view object it commits) or the
parent view's ref (its `merged` list names the child). Every step before that point writes only
unreferenced objects; every step after it is idempotent, and `views.load_live` completes it after a
crash. So a killed commit is committed exactly once or not at all.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, BinaryIO

from reelstore.adapters.base import adapter, adapter_class
from reelstore.attribution import now_ms
from reelstore.backend import content
from reelstore.backend.op_log import operation, riding
from reelstore.backend.refdb.ref_transaction import Owed
from reelstore.backend.refdb.refs import RefTransaction
from reelstore.backend.repo import Repo
from reelstore.codec import FrozenMap, freeze
from reelstore.crashpoints import crash_point
from reelstore.drain import hold, owners
from reelstore.drain.drainer import DrainReport, commit_message, drain
from reelstore.errors import BadInput, Conflict, NotFound, ReelError, RemoteConflict, StorageError, ViewTerminal
from reelstore.hooks.runner import run_hook, run_pre_hook
from reelstore.kernel import admission, approval, binding
from reelstore.kernel.changes import base_namespace, current_delta, namespace, pending_effects
from reelstore.kernel.fork import fork as fork
from reelstore.kernel.merge import changes_of, replay
from reelstore.kernel.transaction import CAS_ATTEMPTS, Transaction, backoff, give_up
from reelstore.kernel.views import (
    Live,
    commit_target,
    descendants,
    find_record,
    fork_id,
    is_child_of,
    landed_in,
    load_live,
    read_view,
    retire,
    terminal_error,
)
from reelstore.objects import Delta, Effect, Effects, Hash, Object, Record, Recording, View
from reelstore.objects.ref import VIEW_PREFIX, trunk_ref
from reelstore.wording import plural

# Class A: namespace writes and reads


def _update(
    repo: Repo,
    name: str,
    change: Callable[[Live], tuple[View, list[Any]]],
    what: str,
    verify: Callable[[], tuple[str, Hash]] | None = None,
) -> View:
    """Apply `change` to the newest view object and CAS the ref, retrying while others write.
    `verify` names another ref that must hold a given value in the same atomic step."""
    settle = True
    with repo.objects.batch():
        for attempt in range(CAS_ATTEMPTS):
            live = load_live(repo, name, settle=settle)
            settle = False
            view, objects = change(live)
            repo.cache.save([*objects, view])
            tx = repo.refs.transaction(what, repo.principal()).update(live.ref, view.id, live.id)
            if verify is not None:
                tx.verify(*verify())
            try:
                tx.commit()
                return view
            except Conflict as exc:
                if give_up(exc, attempt):
                    raise
                backoff(attempt)
    raise Conflict(f"view {name!r} kept changing under {what}; gave up after {CAS_ATTEMPTS} attempts", view=name)


def _materialize(repo: Repo, live: Live) -> tuple[Live, Delta]:
    """The view object a commit names: the live one with its delta written in, so the committed view
    says what it changed. Only objects are written; the view's ref is left alone until the commit
    point (both objects share the view's fork id, which is what marks the view committed)."""
    delta = current_delta(repo, live)
    if live.view.delta is not None or not delta.ops:
        return live, delta
    view = replace(live.view, delta=delta.id)
    repo.cache.save([delta, view])
    return Live(live.name, view), delta


def transaction(repo: Repo, name: str) -> Transaction:
    """A transaction on view `name`: gather puts, removes and effects, land them with `commit()`."""
    return Transaction(repo, name, namespace(repo))


def put(repo: Repo, name: str, path: str, data: bytes) -> Hash:
    """Write `data` under `path` in view `name` (needs write on `path`); returns the content id (a
    blob, or a chunk list for content over the chunking threshold)."""
    return put_stream(repo, name, path, io.BytesIO(data))[0]


def put_stream(repo: Repo, name: str, path: str, stream: BinaryIO) -> tuple[Hash, int]:
    """`put` of everything `stream` yields, with bounded memory; (content id, size). The write
    capability is checked before any content is read, and again when the change lands."""
    with transaction(repo, name) as tx:
        return tx.put_stream(path, stream)


def put_stored(repo: Repo, name: str, path: str, h: Hash) -> None:
    """Bind `path` to content `h` already in the store (a blob or a chunk list; E007 otherwise)."""
    with transaction(repo, name) as tx:
        tx.put_stored(path, h)


def rm(repo: Repo, name: str, path: str) -> None:
    """Remove `path` from view `name` (needs delete on `path`; E001 if it is not there)."""
    with transaction(repo, name) as tx:
        tx.rm(path)


def get(repo: Repo, name: str, path: str) -> bytes:
    """The bytes under `path` in view `name` (needs read; E001 if absent)."""
    return b"".join(read(repo, name, path))


def read(repo: Repo, name: str, path: str) -> Iterator[bytes]:
    """The bytes under `path` in view `name`, piece by piece (bounded memory for any size). The
    capability and the name are checked before the first piece is returned."""
    live = load_live(repo, name, settle=False)
    admission.require(admission.view_caps(repo, live.view), "read", path)
    h = namespace(repo).get(live.view.namespace, path)
    if h is None:
        raise NotFound(f"{path!r} is not in view {name}", name=path)
    return content.read(repo.objects, h)


def ls(repo: Repo, name: str, prefix: str = "") -> list[tuple[str, Hash]]:
    """The names under `prefix` in view `name` that its capabilities let it read, in name order."""
    live = load_live(repo, name, settle=False)
    caps = admission.view_caps(repo, live.view)
    now = admission.now_s()
    return [
        (n, h)
        for n, h in namespace(repo).items(live.view.namespace, prefix)
        if any(c.allows("read", n, now) for c in caps)
    ]


# Class B and C: admission


def effect(
    repo: Repo,
    name: str,
    adapter_name: str,
    op: Mapping[str, Any],
    effect_class: str | None = None,
    version_ref: Mapping[str, Any] | None = None,
    link: Mapping[str, str] | None = None,
    key: str | None = None,
) -> Effect:
    """Admit an effect into view `name`'s buffer: classified by its adapter, checked against the
    view's fire capabilities, budget, expiry and the store's hold. Nothing is sent. `link` goes into
    the effect's meta (a fresh attempt's `supersedes` and `approved_by`); `key` is its task key
    (`Transaction.effect`)."""
    with transaction(repo, name) as tx:
        tx.effect(adapter_name, op, effect_class, version_ref, link, key)
    return tx.effects[-1]


# commit


@dataclass(frozen=True)
class CommitResult:
    """What a commit did: the record it wrote into a trunk (and its drain), or the parent it merged into."""

    view: str
    target: str
    record: Hash | None = None
    parent_view: Hash | None = None
    drain: DrainReport | None = None
    remote: str | None = None
    """The remote whose trunk the record won first (`sync.verbs.commit` sets it), if any."""
    notes: tuple[str, ...] = ()
    """What that remote step has to say (a view ref it deleted there, say)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "view": self.view,
            "target": self.target,
            "record": self.record.hex() if self.record else None,
            "parent_view": self.parent_view.hex() if self.parent_view else None,
            "drain": self.drain.to_json() if self.drain else None,
            "remote": self.remote,
            "notes": list(self.notes),
        }


@operation("commit")
def commit(
    repo: Repo,
    name: str,
    message: str = "",
    author: str | None = None,
    fence: Callable[[str, Hash, Hash], None] | None = None,
) -> CommitResult:
    """Commit view `name`: into its parent view (isolated child of a view; fires nothing) or into its
    trunk (a record, then the drain). E002 with nothing changed if the target moved in a conflicting
    way or a Class B precondition no longer holds. `fence(trunk, head, record)`, if given, runs after
    the record is written and before the trunk moves (`commit --remote` wins the remote trunk there);
    if it raises, the trunk, the view and the drain are untouched. A fence's `remote` attribute names
    the remote it fences on: a view bound to a remote is committed only through that remote (E015)."""
    live = load_live(repo, name)
    view = live.view
    into_parent = view.boundary == "isolated" and view.parent.startswith(VIEW_PREFIX)
    if not into_parent:
        binding.check_commit_point(repo, live, getattr(fence, "remote", None))
    target = view.parent if into_parent else trunk_ref(live.trunk)
    effects = pending_effects(repo, view)
    _adapters_load(effects, name)
    run_pre_hook(repo, "pre-commit", {"REEL_VIEW": name, "REEL_TARGET": target, "REEL_EFFECTS": str(len(effects))})
    hold.check(repo)
    admission.check_budgets(admission.view_caps(repo, view), effects)
    for e in effects:
        if e.effect_class == "B":
            adapter(e.adapter, repo).check_precondition(e)
    at = live.id
    if not into_parent:
        live = approval.require(repo, live, effects)  # E018 unless approved; the record's view lists its approvals
    with repo.objects.batch():
        live, delta = _materialize(repo, live)
        crash_point("commit:checked")
        if into_parent:
            parent = _merge_into_parent(repo, live, at, delta, effects)
            result = CommitResult(name, target, parent_view=parent)
        else:
            record = _advance_trunk(repo, live, at, delta, message, author or repo.principal(), fence)
            result = CommitResult(name, target, record=record)
    crash_point("commit:advanced")
    if into_parent:  # a commit into the trunk logged its mark and retired its view as it advanced
        repo.verbs.append("commit", name, live.id, (result.parent_view or live.id).hex())
    crash_point("commit:logged")
    if into_parent:
        _retire_after_commit(repo, live)
    crash_point("commit:retired")
    if result.record is not None:
        result = replace(result, drain=_drain_committed(repo, live.trunk, result.record))
        crash_point("commit:drained")
    run_hook(
        repo,
        "post-commit",
        {
            "REEL_VIEW": name,
            "REEL_TARGET": target,
            "REEL_RECORD": (result.record or result.parent_view or live.id).hex(),
        },
    )
    return result


def _drain_committed(repo: Repo, trunk: str, record: Hash) -> DrainReport:
    """Send a just-committed record's effects. A store with an outbox (`RefStore.atomic_outbox`) left
    them owed there, in the commit's own transaction: this process drains them by the same leased
    claims as every worker (one it finds held by a worker is left to it), so one machine alone
    behaves as a store of its own."""
    if repo.refs.atomic_outbox:
        from reelstore.fleet.worker import drain_record  # only a shared store loads the fleet and its driver

        return drain_record(repo, trunk, record)
    return drain(repo, trunk, record)


def _adapters_load(effects: list[Effect], view: str) -> None:
    """E014, before anything changes, if a pending effect's adapter cannot be loaded in this process:
    committing it would record an effect no drain here could deliver."""
    for name in sorted({e.adapter for e in effects}):
        try:
            adapter_class(name)
        except BadInput as exc:
            raise BadInput(
                f"cannot commit view {view!r}: a pending effect needs adapter {name!r}, which cannot be "
                f"loaded here ({exc.message}); nothing was committed",
                view=view,
                adapter=name,
            ) from None


def _retire_after_commit(repo: Repo, live: Live) -> None:
    """Delete the committed view's ref. The commit wins over a write that raced it (that newer object
    of the same view is discarded); if the ref cannot be deleted now, the next verb that loads the
    view recognises it as committed (`views.find_record` matches the view's fork id) and retires it.
    A view of another lineage now under the name (a restore that made the name anew after this commit
    landed) is not this commit's to delete."""
    for attempt in range(CAS_ATTEMPTS):
        current = repo.refs.get(live.ref)
        if current is None or fork_id(read_view(repo, current)) != fork_id(live.view):
            return
        try:
            repo.refs.delete(live.ref, current, message=f"commit {live.name}", principal=repo.principal())
            return
        except (Conflict, NotFound) as exc:
            if isinstance(exc, Conflict) and give_up(exc, attempt):
                return
            backoff(attempt)


COMMIT_QUEUE_WAIT_S = 60.0
"""Seconds a commit waits for the commits ahead of it into the same trunk before it gives up (E002)."""


def _advance_trunk(
    repo: Repo,
    live: Live,
    at: Hash,
    delta: Delta,
    message: str,
    author: str,
    fence: Callable[[str, Hash, Hash], None] | None = None,
) -> Hash:
    """Write a record of the view and CAS the trunk to it: the commit point. The same atomic step
    checks that the view's ref still holds `at`, so an abort (or a write) racing the commit either
    lands first and the commit fails, or finds the commit landed.

    Local commits into one trunk queue on a lock (`.reel/commit-TRUNK.queue`, an flock a killed holder
    releases) and take their turn, rather than race for the trunk's ref lock and lose it again and again
    under contention: in its turn a commit loses only to a writer outside the queue (a fetch, an
    update-ref, an undo), and retries. A store shared by machines queues their commits too
    (`RefStore.queue`). A commit with a fence (`--remote`) does not queue: its turn would last a network
    round trip."""
    if fence is not None:
        return _advance_trunk_in_turn(repo, live, at, delta, message, author, fence)
    with (
        repo.files.lock(f"commit-{live.trunk.replace('/', '+')}.queue", COMMIT_QUEUE_WAIT_S),
        repo.refs.queue(trunk_ref(live.trunk)),
    ):
        return _advance_trunk_in_turn(repo, live, at, delta, message, author, None)


def _advance_trunk_in_turn(
    repo: Repo,
    live: Live,
    at: Hash,
    delta: Delta,
    message: str,
    author: str,
    fence: Callable[[str, Hash, Hash], None] | None,
) -> Hash:
    ns = namespace(repo)
    ref = trunk_ref(live.trunk)
    changes = changes_of(delta)
    checked: Hash | None = None
    for attempt in range(CAS_ATTEMPTS):
        head = repo.refs[ref]
        found = find_record(repo, live.view, head, stop=checked)
        if found is not None:
            raise ViewTerminal(
                f"view {live.name!r} was committed as {found.hex()} (by another process)",
                view=live.name,
                state="committed",
                record=found.hex(),
            )
        checked = head
        owners.check_commit(repo, live.name, live.view)
        top = repo.cache.load(head, Record)
        if top.namespace == delta.base:
            root = live.view.namespace
        else:
            root = replay(ns, base_namespace(delta), top.namespace, changes, f"trunk {live.trunk} and view {live.name}")
        record = Record(
            parent=head,
            namespace=root,
            effects=live.view.effects,
            view=live.id,
            author=author,
            message=message or f"commit view {live.name}",
            time=now_ms(),
        )
        repo.cache.save([record])
        crash_point("commit:record-written")
        if fence is not None:
            repo.objects.flush()
        # The view's ref goes in the same transaction as the trunk moves, and the commit mark rides in
        # the same append of the operation log: one fsync makes the whole commit point durable. A store
        # with an outbox writes the record's owed effects in that same atomic step.
        tx = repo.refs.transaction(commit_message(live.name), author).update(ref, record.id, head).delete(live.ref, at)
        if repo.refs.atomic_outbox:
            tx.owe(_owed(repo, live.trunk, record))
        try:
            tx.prepare()
        except Conflict as exc:
            if give_up(exc, attempt):
                raise
            _view_unchanged(repo, live, at)
            backoff(attempt)
            continue
        with riding("commit", live.name, live.id, record.id.hex()):
            if fence is None:
                tx.commit()
            else:
                _fence_locked(repo, tx, fence, live, head, record.id)
        return record.id
    raise Conflict(f"trunk {live.trunk} kept moving; gave up after {CAS_ATTEMPTS} attempts", trunk=live.trunk)


def _owed(repo: Repo, trunk: str, record: Record) -> list[Owed]:
    """The outbox rows of `record`'s effects: the drain's operation ids, in the record's order."""
    items = () if record.effects is None else repo.cache.load(record.effects, Effects).items
    ops = owners.item_ops(repo, trunk, items)
    return [
        Owed(op, trunk, record.id, i, e, repo.cache.load(e, Effect).delivery)
        for i, (op, e) in enumerate(zip(ops, items, strict=True))
    ]


def _fence_locked(
    repo: Repo, tx: RefTransaction, fence: Callable[[str, Hash, Hash], None], live: Live, head: Hash, record: Hash
) -> None:
    """Run the fence with the trunk and the view ref locked and checked (`tx` prepared), so the local step
    after a won fence cannot lose: a fetch in another process fast-forwarding the trunk to this very
    record (marked fetched, so never drained here), or a write to the view, would otherwise slip in
    between, and a record committed on the remote would be drained by no store. They get E002 (the
    ref is locked) instead. A fence that names its remote first leaves a claim (`kernel.claims`) until
    the local trunk holds the record: a crash, or a push whose answer was lost, is settled by the next
    fetch of that remote. A definite refusal (E015) drops the claim; any other failure keeps it."""
    from reelstore.kernel import claims

    remote = getattr(fence, "remote", None)
    claim = claims.Claim(live.trunk, record, head, live.name, remote) if isinstance(remote, str) else None
    try:
        if claim is not None:
            claims.write(repo, claim)
    except BaseException:
        tx.abort()
        raise
    try:
        fence(live.trunk, head, record)
    except RemoteConflict:
        tx.abort()
        if claim is not None:
            claims.clear(repo, live.trunk)
        raise
    except BaseException:
        tx.abort()
        raise
    crash_point("commit:fenced")
    try:
        tx.commit()
    except (OSError, ReelError) as exc:
        why = exc.message if isinstance(exc, ReelError) else str(exc)
        raise StorageError(
            f"record {record.hex()} of view {live.name!r} won the remote trunk, but this store could "
            f"not move {trunk_ref(live.trunk)} to it ({why}); none of its effects was sent. Repair "
            f"the store, then `reel fetch {remote or 'REMOTE'}` makes it this store's commit and `reel "
            "recover` sends them",
            record=record.hex(),
            view=live.name,
        ) from exc
    if claim is not None:
        claims.clear(repo, live.trunk)


def _view_unchanged(repo: Repo, live: Live, at: Hash) -> None:
    """After a lost commit step: E008 if the view was aborted meanwhile, E002 if it was written."""
    current = repo.refs.get(live.ref)
    if current is None:
        raise terminal_error(repo, live.name)
    if current != at:
        raise Conflict(
            f"view {live.name!r} changed while it was being committed; nothing was committed, commit it again",
            view=live.name,
        )


def _merge_into_parent(repo: Repo, live: Live, at: Hash, delta: Delta, effects: list[Effect]) -> Hash:
    """Fold an isolated child into its parent view: delta replayed, effects appended, nothing fired."""
    ns = namespace(repo)
    parent_name = live.view.parent[len(VIEW_PREFIX) :]
    changes = changes_of(delta)

    def change(parent: Live) -> tuple[View, list[Any]]:
        _view_unchanged(repo, live, at)
        if not is_child_of(repo, live.view, parent.view):
            raise ViewTerminal(
                f"cannot commit view {live.name!r}: the view it was forked from is no longer live "
                f"(a newer view is called {parent.name!r}); abort {live.name!r} instead",
                view=live.name,
            )
        merged = tuple(parent.view.meta.get("merged", ()))
        if fork_id(live.view) in merged:
            raise ViewTerminal(f"view {live.name!r} is terminal: another process committed it", view=live.name)
        pview = parent.view
        root = replay(ns, base_namespace(delta), pview.namespace, changes, f"view {parent.name} and view {live.name}")
        objects: list[Any] = []
        block_id = pview.effects
        if effects:
            mine = pending_effects(repo, pview)
            admission.check_budgets(admission.view_caps(repo, pview), mine + effects)
            block = Effects(tuple(e.id for e in mine + effects))
            objects.append(block)
            block_id = block.id
        meta = dict(pview.meta)
        meta["merged"] = (*merged, fork_id(live.view))
        new = replace(pview, namespace=root, delta=None, effects=block_id, meta=FrozenMap(freeze(meta)))
        return new, objects

    try:
        view = _update(repo, parent_name, change, f"merge {live.name}", verify=lambda: (live.ref, at))
    except (NotFound, ViewTerminal) as exc:
        if exc.details.get("view") != parent_name:
            raise
        raise ViewTerminal(
            f"cannot commit view {live.name!r}: its parent view {parent_name!r} is no longer live "
            f"({exc.message}); abort {live.name!r} instead",
            view=live.name,
        ) from None
    return view.id


# abort


@operation("abort")
def abort(repo: Repo, name: str, cleared: Collection[str] = ()) -> list[str]:
    """Abort view `name` and its live descendants (deepest first): their refs are deleted by CAS, no
    fire capability is minted, and gc later collects what only they reached. Returns the names.
    A view bound to a remote is aborted only once its copy there is gone (the remote is in
    `cleared`; `sync.abort` removes the copies first), else E015."""
    live = load_live(repo, name)
    done = []
    family = descendants(repo, live)
    binding.check_abort_point(repo, [*family, live], cleared)
    for child in family:
        if _abort_one(repo, child):
            done.append(child.name)
    if not _abort_one(repo, live):
        raise terminal_error(repo, name)
    done.append(name)
    return done


def _abort_one(repo: Repo, live: Live) -> bool:
    """Delete the view's ref in one atomic step with a check that its commit target still holds a
    value that does not include the view: an abort and a racing commit can never both succeed."""
    for attempt in range(CAS_ATTEMPTS):
        current = repo.refs.get(live.ref)
        if current is None:
            return False
        view = read_view(repo, current)
        target, value = commit_target(repo, view)
        if value is not None and landed_in(repo, view, value):
            retire(repo, Live(live.name, view), value)
            return False
        tx = repo.refs.transaction(f"abort {live.name}", repo.principal())
        tx.delete(live.ref, current).verify(target, value)
        try:
            tx.commit()
        except (Conflict, NotFound) as exc:
            if isinstance(exc, Conflict) and give_up(exc, attempt):
                raise
            backoff(attempt)
            continue
        owners.tombstone(repo, live.name, view)
        repo.verbs.append("abort", live.name, current)
        run_hook(repo, "post-abort", {"REEL_VIEW": live.name})
        return True
    raise Conflict(f"view {live.name!r} kept changing; abort gave up after {CAS_ATTEMPTS} attempts", view=live.name)


def attach_recording(repo: Repo, name: str, recording: Recording, bodies: Sequence[Object]) -> View:
    """Make `recording` (and the response bodies it names) view `name`'s recording of passed-through
    reads: one new view object and one ref CAS, like any write to the view."""
    return _update(
        repo,
        name,
        lambda live: (replace(live.view, recording=recording.id), [*bodies, recording]),
        f"record {plural(len(recording.entries), 'read')}",
    )
