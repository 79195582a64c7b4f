"""Push: send the objects a remote lacks in one sync commit and compare-and-swap its refs.

Each remote ref moves only if it still holds the sync commit this store last saw there: we check
that inside dulwich's `update_refs` (before any data is sent) and receive-pack checks it again under
its ref lock, so a race after the advertisement is lost too. A lost race raises E015 and changes
nothing locally. Deleting a remote ref is a compare-and-swap too.

A view pushed to a remote is bound to it (`kernel.binding`): from then on its one commit point is
that remote, and `commit --remote` deletes the view's remote ref in the same push that advances the
trunk (atomically where the server offers it; otherwise the trunk first, then the view ref).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from reelstore.backend.repo import Repo
from reelstore.errors import BadInput, NotFound, ReelError, RemoteConflict, RemoteRaceLost, StorageError
from reelstore.objects import Hash, Record
from reelstore.objects.ref import VIEW_PREFIX, check_ref_name
from reelstore.sync import messages
from reelstore.sync.mapping import REMOTE_PREFIX, git_ref, tracking_ref
from reelstore.sync.outgoing import OutgoingPack
from reelstore.sync.remote import remote_url
from reelstore.sync.send_pack import ZERO_SHA, GitService, UpdateRefs, hung_up, send_pack
from reelstore.sync.state import Seen, SyncState, fetch_lock
from reelstore.sync.transport import (
    Counter,
    Progress,
    Remote,
    connect,
    dulwich_error,
    remote_progress,
    talking_to,
)
from reelstore.sync.transport_base import text
from reelstore.sync.walk import missing_on_remote

if TYPE_CHECKING:
    from dulwich.objects import ObjectID
    from dulwich.pack import UnpackedObject
    from dulwich.refs import Ref

    from reelstore.objects import View

SYNCED = ("refs/heads/", "refs/views/")
_MAX_WALK = 1_000_000
_HTTP_PIECE = 1 << 16
"""Pack bytes per HTTP chunk of a push's request body (dulwich sends one chunk per record it is given)."""
_STALE_HAVES = (
    "missing necessary objects",
    "unpack-objects abnormal exit",
    "index-pack abnormal exit",
    "did not receive expected object",
    "bad object",
    "missing object",
)


@dataclass(frozen=True, slots=True)
class RefPush:
    """One ref's fate in a push: `new`, `fast-forward`, `up-to-date`, `behind`, `gone` or
    `bound-elsewhere` (a view bound to another remote; these three skipped), or `deleted`."""

    ref: str
    status: str
    old: Hash | None
    new: Hash | None


@dataclass
class PushResult:
    """What a push did: the sync commit it sent (None if nothing needed sending), how many objects, each
    ref's fate, and `notes`: what the push had to do on its own (a recovery, a fallback), in words for
    the user."""

    remote: str
    url: str
    commit: str | None = None
    objects: int = 0
    refs: list[RefPush] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "remote": self.remote,
            "url": self.url,
            "commit": self.commit,
            "objects": self.objects,
            "refs": [
                {
                    "ref": r.ref,
                    "status": r.status,
                    "old": r.old.hex() if r.old else None,
                    "new": r.new.hex() if r.new else None,
                }
                for r in self.refs
            ],
            "notes": self.notes,
        }


def push(repo: Repo, remote: str, refs: list[str] | None = None, progress: Progress | None = None) -> PushResult:
    """Push the named refs (default: every trunk and view) to `remote`; every view pushed (or found
    already there) is bound to `remote`. A view bound to another remote is not pushed (never rebound):
    it is skipped as `bound-elsewhere`, and a push that names only such views is E015.

    A ref the remote moved past (another store pushed, we fetched, ours is older) is skipped; a ref
    that diverged from what the remote holds refuses the whole push with E015, before anything is sent.
    """
    names = _names(repo, refs)
    result = PushResult(remote, remote_url(repo, remote))
    state = SyncState(repo)
    try:
        state.bind(remote, result.url)
        seen = state.seen(remote)
        plan: dict[str, Hash] = {}
        rejected: list[str] = []
        held: list[str] = []
        for ref in names:
            local = repo.refs[ref]
            last = seen.get(ref)
            status = _classify(repo, remote, ref, local, last)
            elsewhere = _bound_elsewhere(repo, local, remote) if ref.startswith(VIEW_PREFIX) else None
            if elsewhere is not None:
                status = "bound-elsewhere"  # a second committable copy would fire its effects twice
                held.append(f"{ref} (bound to {elsewhere})")
            elif status == "new" and ref.startswith(VIEW_PREFIX) and _bound_here(repo, _view(repo, local), remote):
                status = "gone"  # it was on the remote and is no more (aborted there): never resurrect it
            result.refs.append(RefPush(ref, status, last.target if last else None, local))
            if status in ("new", "fast-forward"):
                plan[ref] = local
            elif status == "diverged":
                rejected.append(ref)
        if held and not plan and not rejected and refs:
            raise RemoteConflict(
                f"not pushed to {remote}: {', '.join(held)}. A view is bound to one remote, its one commit "
                "point; a copy on a second remote could be committed there too and its effects would fire twice",
                refs=held,
            )
        if rejected:
            raise RemoteRaceLost(
                f"remote {remote} holds a different history for {', '.join(rejected)}; "
                "fetch, reconcile, and push again (nothing was pushed)",
                refs=rejected,
            )
        if plan:
            _send(repo, state, connect(remote, result.url, repo.config), plan, {}, result, progress)
        views = [
            r
            for r in result.refs
            if r.ref.startswith(VIEW_PREFIX) and r.new and r.status in ("new", "fast-forward", "up-to-date")
        ]
        if views:
            from reelstore.kernel import binding  # views only: a push of trunks never loads the view kernel

            for r in views:
                assert r.new is not None
                binding.bind(repo, _view(repo, r.new), remote, override=True)
        return result
    finally:
        state.close()


def delete(repo: Repo, remote: str, refs: list[str], progress: Progress | None = None) -> PushResult:
    """Delete reel refs on `remote`, each by compare-and-swap against what this store last saw there
    (E015 if one moved, E001 if this store never saw it), and drop their remote-tracking refs."""
    result = PushResult(remote, remote_url(repo, remote))
    state = SyncState(repo)
    try:
        state.bind(remote, result.url)
        seen = state.seen(remote)
        doomed: dict[str, str] = {}
        for name in refs:
            ref = _remote_ref_name(name)
            if ref not in seen:
                raise NotFound(f"remote {remote} has no {ref} that this store has seen; `reel fetch {remote}` first")
            doomed[ref] = seen[ref].git_commit
            result.refs.append(RefPush(ref, "deleted", seen[ref].target, None))
        _send(repo, state, connect(remote, result.url, repo.config), {}, doomed, result, progress)
        return result
    finally:
        state.close()


def _view(repo: Repo, h: Hash) -> View:
    """The view object `h` (its class loaded here: a push of trunks alone never needs it)."""
    from reelstore.objects import View

    return repo.objects.get_as(h, View)


def _bound_here(repo: Repo, view: View, remote: str) -> bool:
    """Is `view` bound to `remote`? (`kernel.binding` is loaded for views only: a push of
    trunks alone never compiles it and the view kernel under it.)"""
    from reelstore.kernel import binding

    return binding.bound_remote(repo, view) == remote


def _bound_elsewhere(repo: Repo, h: Hash, remote: str) -> str | None:
    """The remote other than `remote` that view object `h` is bound to, if any: such a view is not pushed
    to `remote` (and never rebound to it)."""
    from reelstore.kernel import binding

    bound = binding.bound_remote(repo, _view(repo, h))
    return bound if bound is not None and bound != remote else None


def _remote_ref_name(name: str) -> str:
    """`views/pay`, `refs/views/pay`, `refs/remotes/origin/views/pay` or a bare view name → the reel ref."""
    if name.startswith("refs/remotes/"):
        parts = name.split("/", 3)
        name = "refs/" + parts[3] if len(parts) == 4 else name
    if not name.startswith("refs/"):
        name = "refs/" + name if name.startswith(("heads/", "views/")) else VIEW_PREFIX + name
    if not name.startswith(SYNCED):
        raise BadInput(f"{name} is not a trunk or a view; only those are pushed")
    return check_ref_name(name)


def advance_remote_trunk(
    repo: Repo, remote: str, trunk: str, old_record: Hash | None, new_record: Hash, progress: Progress | None = None
) -> PushResult:
    """Move `refs/reel/heads/TRUNK` on the remote from `old_record` to `new_record`, by compare-and-swap,
    and delete the remote ref of the view the record commits, if it is there, in the same push.

    This is the fence of `commit --remote`: of two stores committing on the same synced trunk, one
    wins here and the other gets E015 before it drains anything. A view bound to this remote must
    still be there as this store last saw it (if another store aborted or changed it, E015): so an
    abort anywhere, which deletes the remote copy first, can never be followed by a commit elsewhere.
    """
    ref = check_ref_name(f"refs/heads/{trunk}")
    url = remote_url(repo, remote)
    state = SyncState(repo)
    try:
        state.bind(remote, url)
        seen = state.seen(remote)
        last = seen.get(ref)
        if last is not None and last.target != old_record:
            have = last.target.hex()[:12]
            raise RemoteRaceLost(
                f"trunk {trunk} on remote {remote} is at {have}, not at the record this "
                f"commit builds on; `reel fetch {remote}` first",
                ref=ref,
            )
        result = PushResult(remote, url)
        result.refs.append(RefPush(ref, "fast-forward" if last else "new", old_record, new_record))
        deletes = _committed_view_ref(repo, remote, seen, new_record)
        for view_ref in deletes:
            result.refs.append(RefPush(view_ref, "deleted", seen[view_ref].target, None))
        _send(repo, state, connect(remote, result.url, repo.config), {ref: new_record}, deletes, result, progress)
        return result
    finally:
        state.close()


def _committed_view_ref(repo: Repo, remote: str, seen: dict[str, Seen], record: Hash) -> dict[str, str]:
    """{remote view ref: expected sync commit} for the view `record` commits, if the remote holds it."""
    rec = repo.objects.get_as(record, Record)
    if rec.view is None:
        return {}
    view = _view(repo, rec.view)
    name = str(view.meta.get("name", ""))
    ref = VIEW_PREFIX + name
    last = seen.get(ref)
    there = last is not None and same_view(repo, last.target, view)
    if _bound_here(repo, view, remote) and not there:
        raise RemoteConflict(
            f"view {name!r} is no longer on remote {remote} as this store last saw it (another "
            f"store aborted or committed it); `reel fetch {remote}` shows which; nothing was "
            "committed",
            view=name,
        )
    return {ref: last.git_commit} if there and last is not None else {}


def same_view(repo: Repo, target: Hash, view: View) -> bool:
    """Is `target` an object of the same view (the same fork) as `view`?"""
    try:
        other = repo.objects.get(target)
    except ReelError:
        return False
    from reelstore.kernel.views import fork_id
    from reelstore.objects import View

    return isinstance(other, View) and fork_id(other) == fork_id(view)


class RemoteFence:
    """The hook `commit --remote` runs between writing its record and moving the local trunk:
    `fence(trunk, old_record, new_record)` wins the remote CAS or raises E015. `remote` tells the
    kernel which remote this commit point is (a bound view accepts only its own)."""

    def __init__(self, repo: Repo, remote: str, progress: Progress | None = None) -> None:
        remote_url(repo, remote)
        self.repo, self.remote, self.progress = repo, remote, progress
        self.result: PushResult | None = None

    def __call__(self, trunk: str, old_record: Hash | None, new_record: Hash) -> None:
        self.result = advance_remote_trunk(self.repo, self.remote, trunk, old_record, new_record, self.progress)


def remote_fence(repo: Repo, remote: str, progress: Progress | None = None) -> RemoteFence:
    """The fence of `commit --remote` on `remote` (which must exist)."""
    return RemoteFence(repo, remote, progress)


def _names(repo: Repo, refs: list[str] | None) -> list[str]:
    if not refs:
        return sorted(name for name, _ in repo.refs.list("refs/") if name.startswith(SYNCED))
    out = []
    for name in refs:
        full = repo.ref_name(name)
        if full is None:
            raise NotFound(f"no ref {name!r} to push")
        if full.startswith("refs/remotes/"):
            raise BadInput(f"{full} is a remote-tracking ref; push the local ref instead")
        out.append(full)
    return sorted(set(out))


def _classify(repo: Repo, remote: str, ref: str, local: Hash, last: Seen | None) -> str:
    if last is None:
        return "new"
    if last.target == local:
        return "up-to-date"
    if _came_from(repo, ref, local, last.target):
        return "fast-forward"
    if _came_from(repo, tracking_ref(remote, ref), last.target, local):
        return "behind"
    return "diverged"


def _came_from(repo: Repo, ref: str, head: Hash, earlier: Hash) -> bool:
    """True if `earlier` is in the history of `head`: a parent record, or a past value of `ref`."""
    if any(e.new == earlier or e.old == earlier for e in repo.refs.reflog(ref)):
        return True
    h: Hash | None = head
    for _ in range(_MAX_WALK):
        if h is None:
            return False
        if h == earlier:
            return True
        try:
            obj = repo.objects.get(h)
        except ReelError:
            return False
        h = obj.parent if isinstance(obj, Record) else None
    return False


def _send(
    repo: Repo,
    state: SyncState,
    conn: Remote,
    plan: dict[str, Hash],
    deletes: dict[str, str],
    result: PushResult,
    progress: Progress | None,
) -> None:
    """Push one sync commit setting `plan` and deleting `deletes` (ref → the sync commit it must still
    hold), all by CAS; record the outcome locally only if it won.

    Both go in one atomic push when the server offers it; otherwise `plan` first and `deletes` after
    (a failure of that second step is reported in `result.notes`, not raised: `plan` already won).
    If the remote was emptied since we last pushed, or lacks objects we believed it held (a ref
    deleted there and the server pruned), what we knew of it is forgotten and the push redone in
    full, once, and the result says so.
    """
    for attempt in range(2):
        try:
            if plan and deletes:
                try:
                    _attempt(repo, state, conn, plan, deletes, result, progress, atomic=True)
                except _NoAtomic:
                    result.notes.append(
                        f"remote {conn.name} does not offer atomic pushes: moved "
                        f"{', '.join(sorted(plan))} first, then deleted {', '.join(sorted(deletes))}"
                    )
                    _attempt(repo, state, conn, plan, {}, result, progress)
                    try:
                        _attempt(repo, state, conn, {}, deletes, result, progress)
                    except ReelError as exc:
                        result.notes.append(
                            f"could not delete {', '.join(sorted(deletes))} on {conn.name} "
                            f"({exc.message}); a fetch still sees that view as committed"
                        )
            else:
                _attempt(repo, state, conn, plan, deletes, result, progress)
            return
        except _RemoteEmptied:
            with state:
                state.forget(conn.name)
            result.notes.append(
                f"remote {conn.name} holds no reel refs although this store pushed there before "
                "(emptied or recreated); forgot what was known of it and pushed in full"
            )
        except _StaleHaves as exc:
            if attempt:
                raise RemoteConflict(f"remote {conn.name} still refuses the push after a full resend: {exc}") from None
            with state:
                state.forget_haves(conn.name)
            note = messages.stale_haves(conn.name, str(exc))
            result.notes.append(note)
            if progress:
                progress(note + "\n")
    raise StorageError(f"remote {conn.name} keeps changing under the push; try again")


def _send_pack(
    conn: Remote, update_refs: UpdateRefs, outgoing: OutgoingPack | None, progress: Progress | None, atomic: bool
) -> dict[bytes, str | None]:
    """Push `outgoing` with the ref updates `update_refs` decides: by our own send-pack (`send_pack`) to
    a local repository (git's receive-pack, spawned here) and over ssh:// and git:// (the connection
    dulwich opens), by dulwich's send-pack over HTTP and to its in-process server. Each ref's fate (None:
    moved; else why not)."""
    counter = Counter(progress, "writing objects", len(outgoing)) if outgoing is not None and progress else None
    written = counter.add if counter is not None else None
    side = remote_progress(progress)
    if conn.local:
        with GitService("receive-pack", conn.path) as server:
            try:
                fates = send_pack(server, update_refs, outgoing, atomic=atomic, progress=side, written=written)
            except Exception as exc:
                if not dulwich_error(exc, "HangupException"):
                    raise
                raise server.hung_up() from None
    else:
        from dulwich.client import TraditionalGitClient

        client = conn.client
        if isinstance(client, TraditionalGitClient):
            proto, _, errors = client._connect(b"receive-pack", conn.path)
            with proto:
                try:
                    fates = send_pack(proto, update_refs, outgoing, atomic=atomic, progress=side, written=written)
                except Exception as exc:
                    if not dulwich_error(exc, "HangupException"):
                        raise
                    raise hung_up(errors) from None
        else:
            fates = _dulwich_send_pack(conn, update_refs, outgoing, side, atomic, counter)
    if counter is not None and counter.n:
        counter.done()
    return fates


def _dulwich_send_pack(
    conn: Remote,
    update_refs: UpdateRefs,
    outgoing: OutgoingPack | None,
    side: Callable[[bytes], None] | None,
    atomic: bool,
    counter: Counter | None,
) -> dict[bytes, str | None]:
    """dulwich's send-pack, fed the finished entries (`OutgoingPack.records`): one record each to its
    in-process server, gathered into 64 KiB pieces for an HTTP body."""

    def refs(remote_refs: dict[Ref, ObjectID]) -> dict[Ref, ObjectID]:
        return update_refs(remote_refs)  # type: ignore[return-value,arg-type]

    from dulwich.client import AbstractHttpGitClient

    gather = _HTTP_PIECE if isinstance(conn.client, AbstractHttpGitClient) else 0

    def generate(
        have: AbstractSet[ObjectID],
        want: AbstractSet[ObjectID],
        ofs_delta: bool = True,
        progress: Callable[[bytes], None] | None = None,
    ) -> tuple[int, Iterator[UnpackedObject]]:
        if outgoing is None:
            return 0, iter(())
        return len(outgoing), _counted(outgoing.records(gather), counter)

    sent = conn.client.send_pack(conn.path.encode(), refs, generate, progress=side, atomic=atomic)
    return {bytes(k): v for k, v in (sent.ref_status or {}).items()}


def _counted(records: Iterable[UnpackedObject], counter: Counter | None) -> Iterator[UnpackedObject]:
    """The pack's records, each counted as it is written to the remote."""
    for record in records:
        yield record
        if counter is not None:
            counter.add()


def _attempt(
    repo: Repo,
    state: SyncState,
    conn: Remote,
    plan: dict[str, Hash],
    deletes: dict[str, str],
    result: PushResult,
    progress: Progress | None,
    *,
    atomic: bool = False,
) -> None:
    outgoing = OutgoingPack() if plan else None
    try:
        _exchange(repo, state, conn, plan, deletes, result, progress, outgoing, atomic)
    finally:
        if outgoing is not None:
            outgoing.close()


def _exchange(
    repo: Repo,
    state: SyncState,
    conn: Remote,
    plan: dict[str, Hash],
    deletes: dict[str, str],
    result: PushResult,
    progress: Progress | None,
    outgoing: OutgoingPack | None,
    atomic: bool,
) -> None:
    """One push: walk and pack what the remote lacks, then send it with the refs' compare-and-swap."""
    seen = state.seen(conn.name)
    expected = {git_ref(ref): seen[ref].git_commit.encode() if ref in seen else None for ref in plan}
    doomed = {git_ref(ref): commit.encode() for ref, commit in deletes.items()}
    parents = state.tips(conn.name)
    commit: str | None = None
    new: list[bytes] = []
    if outgoing is not None:
        new = missing_on_remote(repo, state, conn.name, list(plan.values()), outgoing.add_object)
        commit = outgoing.finish(plan, parents)
        if progress:
            progress(messages.pushing(len(new), conn.name, commit) + "\n")

    def update_refs(remote_refs: dict[bytes, bytes]) -> dict[bytes, bytes]:
        if plan and parents and not any(name.startswith(REMOTE_PREFIX.encode()) for name in remote_refs):
            raise _RemoteEmptied
        for name, want in [*expected.items(), *doomed.items()]:
            if remote_refs.get(name) != want:
                raise RemoteRaceLost(
                    f"{name.decode()} on remote {conn.name} moved since this store last "
                    f"saw it; `reel fetch {conn.name}` first",
                    ref=name.decode(),
                )
        out: dict[bytes, bytes] = dict.fromkeys(doomed, ZERO_SHA)
        if commit is not None:
            out.update(dict.fromkeys(expected, commit.encode()))
        return out

    with talking_to(conn):
        try:
            fates = _send_pack(conn, update_refs, outgoing, progress, atomic)
        except Exception as exc:
            if not dulwich_error(exc, "GitProtocolError"):
                raise
            said = text(exc)
            if atomic and "atomic" in said.lower():
                raise _NoAtomic from None
            if any(s in said for s in _STALE_HAVES):
                raise _StaleHaves(said) from None
            raise
    failed = {k.decode(): text(v) for k, v in fates.items() if v}
    if failed:
        said = "; ".join(f"{k}: {v}" for k, v in sorted(failed.items()))
        if commit is not None and any(s in said for s in _STALE_HAVES):
            raise _StaleHaves(said)
        raise RemoteRaceLost(f"remote {conn.name} refused the update: {said}", refs=sorted(failed))
    _record(repo, state, conn.name, commit, plan, deletes, parents, new)
    if commit is not None:
        result.commit, result.objects = commit, len(new)


class _RemoteEmptied(Exception):
    """The remote holds no reel refs although we pushed to it before: it was emptied or recreated."""


class _StaleHaves(Exception):
    """The remote lacks objects our sync state says it has (it pruned what a deleted ref reached)."""


class _NoAtomic(Exception):
    """The server does not offer atomic pushes; nothing was sent."""


def _record(
    repo: Repo,
    state: SyncState,
    remote: str,
    commit: str | None,
    plan: dict[str, Hash],
    deletes: dict[str, str],
    parents: list[str],
    new: list[bytes],
) -> None:
    with state:
        if commit is not None:
            state.add_known(remote, new)
            state.add_commits(remote, {commit: (plan, parents)})
            for ref, target in plan.items():
                state.set_seen(remote, ref, Seen(commit, target))
        for ref in deletes:
            state.drop_seen(remote, ref)
    with fetch_lock(repo):
        tx = repo.refs.transaction(message=f"push {remote}", principal="reel sync")
        for ref, target in plan.items():
            tx.update(tracking_ref(remote, ref), target)
        for ref in deletes:
            if repo.refs.get(tracking_ref(remote, ref)) is not None:
                tx.delete(tracking_ref(remote, ref))
        tx.commit()
