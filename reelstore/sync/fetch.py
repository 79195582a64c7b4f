"""Fetch and clone: bring a remote's reel refs and the objects they reach into this store.

Nothing received is trusted. The pack is staged in a temporary file, every object in it is
re-hashed and decoded (see `unpack`), the closure of every fetched ref is checked complete,
and only then is anything stored: one bad object rejects the whole fetch with E007 and stores nothing.

Then the store catches up: every view fetched is bound to the remote; every local trunk
the remote's has not diverged from is fast-forwarded (as `git pull --ff-only`); a local view whose
commit is now on a trunk (this store's, or the remote's as just fetched) is retired as committed,
naming its own record; and a view the remote no longer holds is reported gone (with `prune`, its
remote-tracking ref is deleted and a local copy bound to that remote is aborted, as it was there).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dulwich.errors import HangupException

from reelstore.backend.object_store import LooseObjectStore
from reelstore.backend.refdb.refs import ANY
from reelstore.backend.repo import DEFAULT_TRUNK, REEL_DIR, Repo
from reelstore.errors import BadInput, Conflict, LockHeld, ReelError, StaleLock, StorageError
from reelstore.kernel import binding, claims
from reelstore.kernel.views import committed_in, find_record, live_views, retire
from reelstore.objects import Hash, Object, Record, View
from reelstore.objects.ref import HEAD_PREFIX, VIEW_PREFIX, check_ref_name, check_target
from reelstore.sync import messages
from reelstore.sync.mapping import reel_ref, tracking_ref
from reelstore.sync.remote import DEFAULT_REMOTE, add_remote, remote_url
from reelstore.sync.send_pack import GitService, fetch_pack, list_refs
from reelstore.sync.state import Seen, SyncState, fetch_lock
from reelstore.sync.transport import Counter, Progress, Remote, connect, remote_progress, size, talking_to

if TYPE_CHECKING:
    from reelstore.sync.unpack import Received

_STORE_BATCH = 16 << 20
_MAX_FETCH = 4 << 30
_MAX_WALK = 1_000_000


@dataclass
class TrunkMove:
    """What a fetch did to a local trunk: `fast-forward`, `up-to-date`, `ahead` or `diverged` (not moved)."""

    trunk: str
    status: str
    old: Hash
    new: Hash

    def to_json(self) -> dict[str, Any]:
        return {"trunk": self.trunk, "status": self.status, "old": self.old.hex(), "new": self.new.hex()}


@dataclass
class FetchResult:
    remote: str
    url: str
    objects: int = 0
    refs: dict[str, Hash] = field(default_factory=dict)
    """Every remote-tracking ref, after the fetch."""
    updated: list[str] = field(default_factory=list)
    trunks: list[TrunkMove] = field(default_factory=list)
    retired: dict[str, Hash] = field(default_factory=dict)
    """Local views found committed (view name → its own record) and retired."""
    gone: list[str] = field(default_factory=list)
    """Remote refs this store had seen that the remote no longer holds."""
    pruned: list[str] = field(default_factory=list)
    aborted: list[str] = field(default_factory=list)
    materialized: list[str] = field(default_factory=list)
    """Views fetched that this store did not have, now live here (bound to the remote), by name."""
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "remote": self.remote,
            "url": self.url,
            "objects": self.objects,
            "updated": self.updated,
            "refs": {name: h.hex() for name, h in sorted(self.refs.items())},
            "trunks": [t.to_json() for t in self.trunks],
            "retired": {name: h.hex() for name, h in sorted(self.retired.items())},
            "gone": self.gone,
            "pruned": self.pruned,
            "aborted": self.aborted,
            "materialized": self.materialized,
            "notes": self.notes,
        }


def fetch(
    repo: Repo,
    remote: str = DEFAULT_REMOTE,
    progress: Progress | None = None,
    *,
    prune: bool = False,
    catch_up: bool = True,
) -> FetchResult:
    """Update `refs/remotes/REMOTE/…` from the remote's `refs/reel/…`, storing what they reach, then
    catch up (see the module doc; `catch_up` False only fetches, for clone).

    The sync commits we know are offered as haves, so the remote sends only newer ones. If what
    they reach turns out incomplete here (this store dropped objects since), the fetch is redone
    once from scratch, without haves.

    Fetches of one store run one at a time (`fetch_lock`): two agents working in one clone each fetch
    in turn, the second waiting for the first, instead of one failing on a ref lock the other holds.
    """
    with fetch_lock(repo):
        return _fetch(repo, remote, progress, prune=prune, catch_up=catch_up)


def _fetch(repo: Repo, remote: str, progress: Progress | None, *, prune: bool, catch_up: bool) -> FetchResult:
    from reelstore.sync.unpack import Omitted  # a fetch's modules load dulwich's object model: on use

    conn = connect(remote, remote_url(repo, remote), repo.config)
    result = FetchResult(remote, conn.url)
    state = SyncState(repo)
    staging = tempfile.TemporaryDirectory(prefix=".tmp-fetch-", dir=_staging_parent(repo))
    try:
        state.bind(remote, conn.url)
        try:
            advertised, got = _receive(repo, conn, state, progress, staging.name, incremental=True)
            targets = _targets(state, remote, advertised, got)
            complete = _first_missing(repo, got, list(targets.values())) is None
        except Omitted:
            complete = False
        if not complete:
            advertised, got = _receive(repo, conn, state, progress, staging.name, incremental=False)
            targets = _targets(state, remote, advertised, got)
            lacking = _first_missing(repo, got, list(targets.values()))
            if lacking is not None:
                raise StorageError(f"the remote lacks object {lacking.hex()}, reachable from a fetched ref", id=lacking)
        _check_kinds(repo, got, targets)
        if progress:
            progress(messages.received(len(got.raws) + len(got.staged), remote) + "\n")
        _store_staged(repo, got)
        repo.objects.put_verified(list(got.raws.items()))
        with state:
            result.gone = sorted(ref for ref in state.seen(remote) if ref not in targets)
            if not advertised:
                state.forget(remote)
            state.add_known(remote, got.ids())
            state.add_commits(remote, {cid: (refs, got.parents[cid]) for cid, refs in got.commits.items()})
            for ref in result.gone:
                state.drop_seen(remote, ref)
            for ref, target in targets.items():
                state.set_seen(remote, ref, Seen(advertised[ref], target))
        result.objects = len(got.raws) + len(got.staged)
        result.updated = _update_tracking(repo, remote, targets)
        for ref, target in targets.items():
            if ref.startswith(VIEW_PREFIX):
                binding.bind(repo, repo.objects.get_as(target, View), remote)
        if catch_up:
            _settle_claims(repo, remote, targets, result)
            result.trunks = _fast_forward(repo, remote, targets)
            result.retired = _retire_committed(repo, remote)
            if prune:
                _prune(repo, remote, targets, result)
            result.materialized = _materialize(repo, remote, targets)
        result.refs = dict(repo.refs.list(f"refs/remotes/{remote}/"))
        return result
    finally:
        state.close()
        staging.cleanup()


def _settle_claims(repo: Repo, remote: str, targets: dict[str, Hash], result: FetchResult) -> None:
    """Finish what an interrupted `commit --remote` at this remote left (`kernel.claims`): if the remote's
    trunk holds the claimed record, the commit won there, so the local trunk moves to it as a commit made
    here (its reflog marks it, and `reel recover` drains it); if not, nothing was committed. Run before
    the fast-forward, so the record is never taken in as another store's."""
    for ref, new in sorted(targets.items()):
        if not ref.startswith(HEAD_PREFIX):
            continue
        trunk = ref[len(HEAD_PREFIX) :]
        claim = claims.read(repo, trunk)
        if claim is None or claim.remote != remote:
            continue
        local = repo.refs.get(ref)
        if _in_flight(repo, ref, local):
            continue  # not interrupted: that commit is running now, in another process, and settles it
        what = f"an interrupted `commit --remote` of view {claim.view!r} (record {claim.record.hex()[:12]})"
        if local is not None and _descends(repo, local, claim.record):
            claims.clear(repo, trunk)  # the commit had landed here too; only its claim was left
        elif not _descends(repo, new, claim.record):
            claims.clear(repo, trunk)
            result.notes.append(f"{what} did not reach remote {remote}: nothing was committed")
        elif local == claim.base:
            from reelstore.drain.drainer import commit_message  # on use: fetch needs nothing else of the drain

            tx = repo.refs.transaction(commit_message(claim.view), "reel sync")
            tx.update(ref, claim.record, claim.base).commit()
            claims.clear(repo, trunk)
            result.notes.append(
                f"{what} had won remote {remote} before it stopped: trunk {trunk} now holds the record "
                "as committed here, and `reel recover` sends its effects"
            )
        else:
            result.notes.append(
                f"{what} won remote {remote}, but trunk {trunk} has moved here since; its effects "
                f"were not sent. The claim stays in {repo.files.where(claims.PREFIX + trunk)} until "
                "an operator settles it"
            )


def _in_flight(repo: Repo, ref: str, local: Hash | None) -> bool:
    """Is a commit on trunk `ref` running now? It holds the trunk's ref lock from before its claim is
    written until the trunk has moved, so a live (not stale) lock on the trunk says so."""
    tx = repo.refs.transaction("fetch: is a commit running", "reel sync").verify(ref, local)
    try:
        tx.prepare()
    except Conflict as exc:
        return isinstance(exc, LockHeld) and not isinstance(exc, StaleLock)
    tx.abort()
    return False


def _fast_forward(repo: Repo, remote: str, targets: dict[str, Hash]) -> list[TrunkMove]:
    """Move every local trunk the remote's trunk descends from up to it, by CAS (`git pull --ff-only`).
    The reflog message does not mark the records as committed here: their drains are not ours."""
    moves = []
    for ref, new in sorted(targets.items()):
        if not ref.startswith(HEAD_PREFIX):
            continue
        old = repo.refs.get(ref)
        if old is None:
            continue
        trunk = ref[len(HEAD_PREFIX) :]
        if old == new:
            status = "up-to-date"
        elif _descends(repo, new, old):
            try:
                repo.refs.set(ref, new, old, message=f"fetch {remote}: fast-forward", principal="reel sync")
                status = "fast-forward"
            except ReelError:
                status = "diverged"
        elif _descends(repo, old, new):
            status = "ahead"
        else:
            status = "diverged"
        moves.append(TrunkMove(trunk, status, old, new))
    return moves


def _descends(repo: Repo, head: Hash, ancestor: Hash) -> bool:
    h: Hash | None = head
    for _ in range(_MAX_WALK):
        if h is None:
            return False
        if h == ancestor:
            return True
        obj = repo.objects.get(h)
        h = obj.parent if isinstance(obj, Record) else None
    return False


def _retire_committed(repo: Repo, remote: str) -> dict[str, Hash]:
    """Retire every live view whose commit landed on its local trunk, or (bound to `remote`) on the
    remote's trunk as just fetched: it is terminal, and says so naming its own record."""
    out = {}
    for live in live_views(repo):
        if not live.trunk or (live.view.boundary == "isolated" and live.view.parent.startswith(VIEW_PREFIX)):
            continue
        found = committed_in(repo, live.view)
        if found is None and binding.bound_remote(repo, live.view) == remote:
            head = repo.refs.get(binding.tracking_trunk(remote, live.trunk))
            found = find_record(repo, live.view, head, stop=None) if head is not None else None
        if found is not None:
            retire(repo, live, found)
            out[live.name] = found
    return out


def _prune(repo: Repo, remote: str, targets: dict[str, Hash], result: FetchResult) -> None:
    """Delete remote-tracking refs the remote no longer has, and abort local views bound to `remote`
    whose copy there is gone (another store aborted them there: that abort holds here too)."""
    prefix = f"refs/remotes/{remote}/"
    wanted = {tracking_ref(remote, ref) for ref in targets}
    for name, _ in repo.refs.list(prefix):
        if name not in wanted:
            repo.refs.delete(name, message=f"fetch --prune {remote}", principal="reel sync")
            result.pruned.append(name)
    for live in live_views(repo):
        if binding.bound_remote(repo, live.view) != remote or live.ref in targets:
            continue
        if repo.refs.get(live.ref) is None:
            continue
        from reelstore.kernel.verbs import abort as abort_view

        try:
            result.aborted += abort_view(repo, live.name, cleared={remote})
        except ReelError as exc:
            result.notes.append(f"view {live.name} is gone from {remote} but was not aborted here: {exc.message}")


def _materialize(repo: Repo, remote: str, targets: dict[str, Hash]) -> list[str]:
    """Make each fetched view this store lacks a live view here, as a clone checks them out, so a view
    handed over by a push can be committed (at `remote`, the view being bound to it) without moving a
    ref by hand. Not one whose commit is on a trunk (the remote's as fetched, or this store's), nor one
    this store committed or aborted itself, nor one on a trunk this store does not have, nor one bound
    here to no remote or another one."""
    heads = {ref[len(HEAD_PREFIX) :]: h for ref, h in targets.items() if ref.startswith(HEAD_PREFIX)}
    made = []
    for ref, target in sorted(targets.items()):
        if not ref.startswith(VIEW_PREFIX) or repo.refs.get(ref) is not None:
            continue
        name = ref[len(VIEW_PREFIX) :]
        view = repo.objects.get_as(target, View)
        trunk = str(view.meta.get("trunk", ""))
        if not _has_trunk(repo, trunk) or _ended_here(repo, name, view):
            continue
        if committed_in(repo, view) is not None or _landed(repo, ref, target, heads):
            continue
        if binding.bound_remote(repo, view) != remote:
            continue  # unbound here by choice, or bound to another remote: not this fetch's to make live
        try:
            repo.refs.set(ref, target, None, message=f"fetch {remote}: view {name}", principal="reel sync")
        except ReelError:
            continue  # made meanwhile by another process: it is live here either way
        made.append(name)
    return made


def _has_trunk(repo: Repo, trunk: str) -> bool:
    try:
        return bool(trunk) and repo.refs.get(HEAD_PREFIX + trunk) is not None
    except BadInput:  # a view naming no valid trunk has nowhere to be committed here
        return False


def _ended_here(repo: Repo, name: str, view: View) -> bool:
    """Did this store commit or abort this very view (the same fork) under `name`?"""
    end = repo.verbs.last_end(name)
    if end is None:
        return False
    try:
        ended = repo.objects.get(Hash.from_hex(end.view))
    except ReelError:
        return False
    from reelstore.kernel.views import fork_id

    return isinstance(ended, View) and fork_id(ended) == fork_id(view)


def _staging_parent(repo: Repo) -> str | None:
    """Large received blobs wait beside the store's objects (the same file system), or in the
    system's temporary directory for an in-memory store."""
    return str(repo.path / "objects") if repo.path is not None else None


def _store_staged(repo: Repo, got: Received) -> None:
    """Move the verified large blobs from the staging store into the store, a batch at a time."""
    if got.staging is None:
        return
    batch: list[Object] = []
    held = 0
    for h in sorted(got.staged):
        obj = got.staging.get(h)
        batch.append(obj)
        held += len(obj.encode())
        if held >= _STORE_BATCH:
            repo.objects.put_many(batch)
            batch, held = [], 0
    repo.objects.put_many(batch)


def _receive(
    repo: Repo, conn: Remote, state: SyncState, progress: Progress | None, staging: str, *, incremental: bool
) -> tuple[dict[str, str], Received]:
    """One fetch round: the advertised reel refs (ref → sync commit) and the verified objects received.
    A local repository is fetched from by our own fetch-pack (`send_pack.fetch_pack`, git's upload-pack
    spawned here); any other remote by dulwich's."""
    from reelstore.sync.incoming import read_pack
    from reelstore.sync.unpack import unpack

    advertised: dict[str, str] = {}

    def determine_wants(refs: Mapping[bytes, bytes | None], depth: int | None = None) -> list[bytes]:
        for name, sha in refs.items():
            ref = reel_ref(name)
            if ref is not None and sha is not None:
                advertised[_checked(ref)] = sha.decode()
        return sorted(
            {
                sha.encode()
                for sha in advertised.values()
                if not incremental or state.commit_refs(conn.name, sha) is None
            }
        )

    tips = [t.encode() for t in state.tips(conn.name)] if incremental else []
    limit = _max_bytes(repo)
    round_name = "incremental" if incremental else "full"
    received = Path(staging) / f"{round_name}.pack"
    counted = Counter(progress, "receiving pack", unit=size)
    with received.open("wb") as spool, talking_to(conn):

        def write(chunk: bytes) -> int:
            if spool.tell() + len(chunk) > limit:
                raise StorageError(f"remote {conn.name} sent more than sync.maxFetchBytes = {limit} bytes")
            counted.add(len(chunk))
            return spool.write(chunk)

        _fetch_pack(conn, determine_wants, tips, write, remote_progress(progress), limit)
        if counted.n:
            counted.done()
    store = LooseObjectStore(Path(staging) / round_name, fsync=False)
    try:
        return advertised, unpack(read_pack(received, store), repo.objects.has)
    finally:
        received.unlink()


def _fetch_pack(
    conn: Remote,
    determine_wants: Callable[[Mapping[bytes, bytes | None]], list[bytes]],
    tips: list[bytes],
    write: Callable[[bytes], int],
    side: Callable[[bytes], None] | None,
    limit: int,
) -> None:
    """Fetch what `determine_wants` picks, offering `tips` as haves: by our own fetch-pack from git's
    upload-pack for a local repository, else by dulwich's client."""
    if conn.local:
        with GitService("upload-pack", conn.path) as server:
            try:
                fetch_pack(server, determine_wants, tips, write, side, budget=2 * limit + (1 << 20))
            except HangupException:
                raise server.hung_up() from None
        return
    from dulwich.object_store import ObjectStoreGraphWalker
    from dulwich.objects import ObjectID

    walker = ObjectStoreGraphWalker([ObjectID(t) for t in tips], lambda _sha: [])
    conn.client.fetch_pack(conn.path, determine_wants, walker, write, progress=side)  # type: ignore[arg-type]


def _list_refs(conn: Remote) -> dict[bytes, bytes]:
    """The refs the remote advertises (by our own client for a local repository)."""
    if conn.local:
        with GitService("upload-pack", conn.path) as server:
            try:
                return list_refs(server)
            except HangupException:
                raise server.hung_up() from None
    return {bytes(name): bytes(sha) for name, sha in conn.client.get_refs(conn.path.encode()).refs.items() if sha}


def _max_bytes(repo: Repo) -> int:
    """The most a fetch may receive (`sync.maxFetchBytes`, default 4 GiB): a remote is not trusted with our disk."""
    value = repo.config.get("sync.maxfetchbytes", str(_MAX_FETCH))
    if not value.isdigit() or int(value) <= 0:
        raise BadInput(f"sync.maxFetchBytes = {value!r} is not a positive number of bytes")
    return int(value)


def clone(url: str, directory: Path | str, progress: Progress | None = None) -> tuple[Repo, FetchResult]:
    """A new store in DIRECTORY with `url` as `origin`, its trunks and views checked out.

    The trunk is the remote's `main` if it has one, else its first trunk. On failure the new
    store is removed again, so a refused clone leaves nothing behind.
    """
    base = Path(directory)
    if (base / REEL_DIR).exists():
        raise BadInput(f"{base / REEL_DIR} already exists")
    url = _absolute(url)
    conn = connect(DEFAULT_REMOTE, url)
    with talking_to(conn):
        listed = _list_refs(conn)
    trunks = sorted(
        ref.removeprefix("refs/heads/") for ref in filter(None, map(reel_ref, listed)) if ref.startswith("refs/heads/")
    )
    trunk = DEFAULT_TRUNK if DEFAULT_TRUNK in trunks or not trunks else trunks[0]
    created = not base.exists()
    repo = Repo.init(base, trunk)
    try:
        add_remote(repo, DEFAULT_REMOTE, url)
        result = fetch(repo, DEFAULT_REMOTE, progress, catch_up=False)
        tx = repo.refs.transaction(message=f"clone {url}", principal="reel sync")
        heads = {}
        for name, target in result.refs.items():
            local = "refs/" + name.removeprefix(f"refs/remotes/{DEFAULT_REMOTE}/")
            if local.startswith(HEAD_PREFIX):
                tx.update(local, target, ANY if local == f"refs/heads/{trunk}" else None)
                heads[local[len(HEAD_PREFIX) :]] = target
        for name, target in result.refs.items():
            local = "refs/" + name.removeprefix(f"refs/remotes/{DEFAULT_REMOTE}/")
            if local.startswith(VIEW_PREFIX) and not _landed(repo, local, target, heads):
                tx.update(local, target, None)
        tx.commit()
        for t in heads:
            binding.track(repo, t, DEFAULT_REMOTE)
    except (ReelError, OSError):
        shutil.rmtree(base if created else base / REEL_DIR, ignore_errors=True)
        raise
    return repo, result


def _absolute(url: str) -> str:
    """A relative path names a directory from here; the new store lives elsewhere, so keep it absolute."""
    if "://" in url or url.startswith("git@") or not Path(url).exists():
        return url
    return str(Path(url).resolve())


def _landed(repo: Repo, ref: str, target: Hash, heads: dict[str, Hash]) -> bool:
    """Is the remote view `ref` already committed on its trunk (its ref was left behind by a server
    without atomic pushes)? Such a view is terminal and is not checked out."""
    view = repo.objects.get_as(target, View)
    head = heads.get(str(view.meta.get("trunk", "")))
    return head is not None and find_record(repo, view, head, stop=None) is not None


def _checked(ref: str) -> str:
    try:
        return check_ref_name(ref)
    except BadInput:
        raise StorageError(f"remote advertises a malformed reel ref {ref!r}") from None


def _targets(state: SyncState, remote: str, advertised: dict[str, str], got: Received) -> dict[str, Hash]:
    """The reel target of every advertised ref, read from the `refs` file of the commit it points at."""
    out = {}
    for ref, cid in advertised.items():
        recorded = got.commits.get(cid) or state.commit_refs(remote, cid)
        if recorded is None or ref not in recorded:
            raise StorageError(f"remote ref {ref} points at {cid}, which does not record it")
        out[ref] = recorded[ref]
    return out


def _check_kinds(repo: Repo, got: Received, targets: dict[str, Hash]) -> None:
    """E007 if a remote ref points at an object its namespace forbids (a trunk at a blob): nothing is stored."""
    for ref, target in targets.items():
        kind = got.kind(target) or repo.objects.get(target).kind
        try:
            check_target(ref, kind)
        except BadInput as exc:
            raise StorageError(f"remote {exc.message}", ref=ref) from None


def _first_missing(repo: Repo, got: Received, targets: list[Hash]) -> Hash | None:
    """An object reachable from the fetched refs that is neither received nor already here, if any.

    Only the received nodes are walked one by one; what they name that is not a node (the blobs, the
    bulk of a fetch) is gathered and checked against what was received in set operations, and only
    what is left is looked up in the store."""
    nodes = got.nodes
    stack = list(targets)
    visited: set[Hash] = set()
    leaves: set[Hash] = set()
    while stack:
        h = stack.pop()
        if h in visited:
            continue
        visited.add(h)
        node = nodes.get(h)
        if node is None:
            leaves.add(h)
            continue
        refs = node.references()
        leaves.update(refs)
        stack.extend(filter(nodes.__contains__, refs))
    leaves -= nodes.keys()
    leaves -= got.raws.keys()
    leaves -= got.staged
    return next((h for h in sorted(leaves) if not repo.objects.has(h)), None)


def _update_tracking(repo: Repo, remote: str, targets: dict[str, Hash]) -> list[str]:
    tx = repo.refs.transaction(message=f"fetch {remote}", principal="reel sync")
    updated = []
    for ref, target in sorted(targets.items()):
        name = tracking_ref(remote, ref)
        if repo.refs.get(name) != target:
            tx.update(name, target)
            updated.append(name)
    if updated:
        tx.commit()
    return updated
