"""Bound views and tracking trunks: a synced view has one commit point, its remote, so
its effects cannot fire from two stores.

A view that was pushed to, cloned from or fetched from a remote has a copy there that another store
can commit. Committing it locally as well would drain its effects twice, so it is *bound* to that
remote: a commit must win the remote's trunk compare-and-swap (`commit --remote`), and an abort must
remove the remote copy first. The binding is kept per view lineage (its fork id, shared by every
object of one view), so a later view that reuses the name starts unbound. It is local, never synced:
one file `.reel/bindings/<fork id>` holding `remote NAME` or `unbound` (the user's explicit choice),
and the same choice as a durable line `<fork id> remote NAME` (or `unbound`) appended to
`.reel/bindings/LOG`, so that losing the file cannot make a pushed view committable here: a view
whose file is missing is bound as the log last says (and fsck reports the missing file). A view is
bound to one remote at a time; a push to another remote leaves it out (`sync.push`).

A trunk that tracks a remote (`trunk.<name>.remote` in config, set by clone and by
`reel remote add --track`) makes that remote the default commit point of every commit into it.
"""

from __future__ import annotations

from collections.abc import Collection

from reelstore.backend import binding_log
from reelstore.backend.repo import Repo
from reelstore.errors import RemoteConflict, StorageError, ViewTerminal
from reelstore.kernel.views import Live, find_record, fork_id, live_views
from reelstore.objects import View

UNBOUND = binding_log.UNBOUND


def _name(view: View) -> str:
    fork = fork_id(view)
    if not fork or not all(c in "0123456789abcdef" for c in fork):
        raise StorageError(f"view {view.id.hex()} has a malformed fork id {fork!r}")
    return f"bindings/{fork}"


def _read(repo: Repo, view: View) -> str | None:
    name = _name(view)
    raw = repo.files.read(name)
    if raw is None:
        raw = binding_log.logged(repo.files).get(name[len("bindings/") :], "").encode() or None
    if raw is None:
        return None
    text = raw.decode("utf-8", "replace").strip()
    if text == UNBOUND:
        return UNBOUND
    kind, _, remote = text.partition(" ")
    if kind != "remote" or not remote:
        raise StorageError(f"binding file {repo.files.where(name)} is malformed: {text[:80]!r}")
    return remote


def _write(repo: Repo, view: View, value: str) -> None:
    text = UNBOUND if value == UNBOUND else f"remote {value}"
    name = _name(view)
    repo.files.append(binding_log.LOG, f"{name[len('bindings/') :]} {text}\n".encode())
    repo.files.write(name, (text + "\n").encode())


def bound_remote(repo: Repo, view: View) -> str | None:
    """The remote `view` is bound to, or None (never synced, or explicitly unbound)."""
    value = _read(repo, view)
    return None if value in (None, UNBOUND) else value


def bind(repo: Repo, view: View, remote: str, *, override: bool = False) -> None:
    """Bind `view` to `remote`. A fetch or clone (`override` False) keeps an explicit unbinding; a
    push (`override` True) always binds, since it puts a committable copy on the remote again."""
    current = _read(repo, view)
    if current == remote or (current == UNBOUND and not override):
        return
    _write(repo, view, remote)


def unbind(repo: Repo, view: View) -> str | None:
    """Dangerous: let `view` be committed locally although a copy may live on a remote. Returns the
    remote it was bound to."""
    was = bound_remote(repo, view)
    _write(repo, view, UNBOUND)
    return was


def bound_to(repo: Repo, remote: str) -> list[str]:
    """The names of the live views bound to `remote`, sorted."""
    return sorted({live.name for live in live_views(repo) if _read(repo, live.view) == remote})


def rebind_remote(repo: Repo, old: str, new: str) -> int:
    """Live views bound to remote `old` are bound to `new` instead (the remote was renamed). Returns
    how many bindings changed."""
    moved: set[str] = set()
    for live in live_views(repo):
        name = _name(live.view)
        if name not in moved and _read(repo, live.view) == old:
            _write(repo, live.view, new)
            moved.add(name)
    return len(moved)


def tracked_remote(repo: Repo, trunk: str) -> str | None:
    """The remote trunk `trunk` tracks (its commits default to `--remote` there), if any."""
    return repo.config.get(f"trunk.{trunk}.remote") or None


def track(repo: Repo, trunk: str, remote: str) -> None:
    repo.config.set(f"trunk.{trunk}.remote", remote)


def tracking_trunk(remote: str, trunk: str) -> str:
    """The remote-tracking ref of `trunk` on `remote` (as `sync.mapping.tracking_ref` names it)."""
    return f"refs/remotes/{remote}/heads/{trunk}"


def check_commit_point(repo: Repo, live: Live, remote: str | None) -> None:
    """Refuse a commit of a bound view anywhere but at its remote (E015), and a commit of a view the
    remote's trunk already holds, as last fetched (E008, naming that view's own record)."""
    bound = bound_remote(repo, live.view)
    if bound is None:
        return
    head = repo.refs.get(tracking_trunk(bound, live.trunk))
    found = find_record(repo, live.view, head, stop=None) if head is not None and repo.objects.has(head) else None
    if found is not None:
        from reelstore.kernel import claims  # on use: only a view the remote already holds gets here

        claim = claims.read(repo, live.trunk)
        unsettled = (
            f"; this store committed it there but stopped before its own trunk moved: `reel fetch {bound}` "
            "makes it this store's commit, then `reel recover` sends its effects"
            if claim is not None and claim.record == found
            else ""
        )
        raise ViewTerminal(
            f"view {live.name!r} was committed as {found.hex()} (on remote {bound}){unsettled}",
            view=live.name,
            state="committed",
            record=found.hex(),
        )
    if remote != bound:
        where = "without --remote" if remote is None else f"at remote {remote!r}"
        raise RemoteConflict(
            f"view {live.name!r} is bound to remote {bound!r} (it was pushed, cloned or fetched there), so it "
            f"cannot be committed {where}: another store may commit the same view there, and its effects "
            f"would fire twice. Commit it with `reel commit {live.name} --remote {bound}` (or, accepting "
            f"that danger, unbind it with `reel views --unbind {live.name}`)",
            view=live.name,
            remote=bound,
        )


def check_abort_point(repo: Repo, views: list[Live], cleared: Collection[str]) -> None:
    """Refuse to abort a bound view whose remote copy has not been removed (E015): another store
    could still commit that copy."""
    for live in views:
        bound = bound_remote(repo, live.view)
        if bound is not None and bound not in cleared:
            raise RemoteConflict(
                f"view {live.name!r} is bound to remote {bound!r}: its copy there must be removed before it is "
                f"aborted, or another store could still commit it; `reel abort {live.name}` does both",
                view=live.name,
                remote=bound,
            )
