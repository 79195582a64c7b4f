"""Push: send the objects a remote lacks in one sync commit and compare-and-swap its refs.

Each remote ref moves only if it still holds the sync commit this store last saw there: we check
that inside dulwich's `update_refs` (before any data is sent) and receive-pack checks it again under
its ref lock, so a race after the advertisement is lost too. A lost race raises E015 and changes
nothing locally.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from dulwich.pack import pack_objects_to_data

from reelstore.errors import BadInput, NotFound, ReelError, RemoteConflict, StorageError
from reelstore.objects import Blob, Hash, Record, decode
from reelstore.storage.refs import check_ref_name
from reelstore.storage.repo import Repo
from reelstore.sync.mapping import REMOTE_PREFIX, build_commit, git_ref, tracking_ref
from reelstore.sync.remote import remote_url
from reelstore.sync.state import Seen, SyncState
from reelstore.sync.transport import Progress, Remote, connect, remote_progress, talking_to

SYNCED = ("refs/heads/", "refs/views/")
_MAX_WALK = 1_000_000
_LEAF = Blob.kind.encode() + b"\0"


@dataclass
class RefPush:
    """One ref's fate in a push: `new`, `fast-forward`, `up-to-date` or `behind` (skipped)."""

    ref: str
    status: str
    old: Hash | None
    new: Hash


@dataclass
class PushResult:
    remote: str
    url: str
    commit: str | None = None
    objects: int = 0
    refs: list[RefPush] = field(default_factory=list)

    def to_json(self) -> dict:
        return {
            "remote": self.remote, "url": self.url, "commit": self.commit, "objects": self.objects,
            "refs": [{"ref": r.ref, "status": r.status, "old": r.old.hex() if r.old else None, "new": r.new.hex()}
                     for r in self.refs],
        }


def push(repo: Repo, remote: str, refs: list[str] | None = None, progress: Progress | None = None) -> PushResult:
    """Push the named refs (default: every trunk and view) to `remote`.

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
        rejected = []
        for ref in names:
            local = repo.refs[ref]
            last = seen.get(ref)
            status = _classify(repo, remote, ref, local, last)
            result.refs.append(RefPush(ref, status, last.target if last else None, local))
            if status in ("new", "fast-forward"):
                plan[ref] = local
            elif status == "diverged":
                rejected.append(ref)
        if rejected:
            raise RemoteConflict(
                f"remote {remote} holds a different history for {', '.join(rejected)}; "
                "fetch, reconcile, and push again (nothing was pushed)", refs=rejected)
        if plan:
            _send(repo, state, connect(remote, result.url), plan, result, progress)
        return result
    finally:
        state.close()


def advance_remote_trunk(repo: Repo, remote: str, trunk: str, old_record: Hash | None, new_record: Hash,
                         progress: Progress | None = None) -> PushResult:
    """Move `refs/reel/heads/TRUNK` on the remote from `old_record` to `new_record`, by compare-and-swap.

    This is the fence of `commit --remote`: of two stores committing on the same synced trunk, one
    wins here and the other gets E015 before it drains anything.
    """
    ref = check_ref_name(f"refs/heads/{trunk}")
    url = remote_url(repo, remote)
    state = SyncState(repo)
    try:
        state.bind(remote, url)
        last = state.seen(remote).get(ref)
        if last is not None and last.target != old_record:
            have = last.target.hex()[:12]
            raise RemoteConflict(f"trunk {trunk} on remote {remote} is at {have}, not at the record this "
                                 "commit builds on; fetch first", ref=ref)
        result = PushResult(remote, url)
        result.refs.append(RefPush(ref, "fast-forward" if last else "new", old_record, new_record))
        _send(repo, state, connect(remote, result.url), {ref: new_record}, result, progress)
        return result
    finally:
        state.close()


def remote_fence(repo: Repo, remote: str, progress: Progress | None = None) -> Callable[[str, Hash | None, Hash], None]:
    """The hook `commit --remote` runs between writing its record and moving the local trunk:
    `fence(trunk, old_record, new_record)` wins the remote CAS or raises E015 (the remote must exist)."""
    remote_url(repo, remote)

    def fence(trunk: str, old_record: Hash | None, new_record: Hash) -> None:
        advance_remote_trunk(repo, remote, trunk, old_record, new_record, progress)

    return fence


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


def missing_on_remote(repo: Repo, state: SyncState, remote: str, targets: list[Hash]) -> list[tuple[Hash, bytes]]:
    """The closure of `targets` minus what the remote holds, as (id, canonical bytes): walk down and
    stop at known objects. Blobs, the bulk of a store, have no edges and are not decoded."""
    out: list[tuple[Hash, bytes]] = []
    visited: set[Hash] = set()
    frontier = list(dict.fromkeys(targets))
    while frontier:
        known = state.known(remote, frontier)
        nxt: list[Hash] = []
        for h in frontier:
            if h in known or h in visited:
                continue
            visited.add(h)
            try:
                raw = repo.objects.get_raw(h)
            except NotFound:
                raise StorageError(f"cannot push: object {h.hex()} is missing from this store", id=h) from None
            out.append((h, raw))
            if not raw.startswith(_LEAF):
                nxt.extend(r for r in decode(raw).references() if r not in visited)
        frontier = list(dict.fromkeys(nxt))
    return out


def _send(repo: Repo, state: SyncState, conn: Remote, plan: dict[str, Hash], result: PushResult,
          progress: Progress | None) -> None:
    """Push one sync commit with the CAS; record the outcome locally only if it won.

    If the remote turns out to have been emptied since we last pushed, what we knew of it is
    forgotten and the push is redone in full, once.
    """
    for _ in range(2):
        try:
            _attempt(repo, state, conn, plan, result, progress)
            return
        except _RemoteEmptied:
            with state:
                state.forget(conn.name)
    raise StorageError(f"remote {conn.name} keeps changing under the push; try again")


def _attempt(repo: Repo, state: SyncState, conn: Remote, plan: dict[str, Hash], result: PushResult,
             progress: Progress | None) -> None:
    seen = state.seen(conn.name)
    expected = {git_ref(ref): seen[ref].git_commit.encode() if ref in seen else None for ref in plan}
    parents = state.tips(conn.name)
    new = missing_on_remote(repo, state, conn.name, list(plan.values()))
    sync = build_commit(new, plan, parents)
    if progress:
        progress(f"pushing {len(new)} objects to {conn.name} in sync commit {sync.id[:12]}")

    def update_refs(remote_refs: dict[bytes, bytes]) -> dict[bytes, bytes]:
        if parents and not any(name.startswith(REMOTE_PREFIX.encode()) for name in remote_refs):
            raise _RemoteEmptied
        for name, want in expected.items():
            if remote_refs.get(name) != want:
                raise RemoteConflict(f"{name.decode()} on remote {conn.name} moved since this store last "
                                     "saw it; fetch first", ref=name.decode())
        return {name: sync.commit.id for name in expected}

    def generate(have: set, want: set, ofs_delta: bool = True, progress: object = None) -> tuple:
        return pack_objects_to_data(sync.objects, deltify=False, ofs_delta=ofs_delta)

    with talking_to(conn):
        sent = conn.client.send_pack(conn.path, update_refs, generate, progress=remote_progress(progress))
    failed = {k.decode(): v for k, v in (sent.ref_status or {}).items() if v}
    if failed:
        raise RemoteConflict(f"remote {conn.name} refused the update: "
                             + "; ".join(f"{k}: {v}" for k, v in sorted(failed.items())), refs=sorted(failed))
    _record(repo, state, conn.name, sync.id, plan, parents, new)
    result.commit, result.objects = sync.id, len(new)


class _RemoteEmptied(Exception):
    """The remote holds no reel refs although we pushed to it before: it was emptied or recreated."""


def _record(repo: Repo, state: SyncState, remote: str, commit: str, plan: dict[str, Hash], parents: list[str],
            new: list[tuple[Hash, bytes]]) -> None:
    with state:
        state.add_known(remote, (h for h, _ in new))
        state.add_commits(remote, {commit: (plan, parents)})
        for ref, target in plan.items():
            state.set_seen(remote, ref, Seen(commit, target))
    tx = repo.refs.transaction(message=f"push {remote}", principal="reel sync")
    for ref, target in plan.items():
        tx.update(tracking_ref(remote, ref), target)
    tx.commit()
