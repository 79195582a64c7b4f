"""Abort of a bound view: its remote copy goes first, so no other store can commit it afterwards.

A view bound to a remote (`kernel.binding`) has a copy there. Aborting only the local ref would leave
that copy for another store to commit, firing what this store discarded. So the remote ref is deleted
first, by compare-and-swap against what a fresh fetch saw; only then is the view aborted here. If the
remote cannot be reached, or the copy moved, nothing is aborted (E010, E015); if the fetch shows the
view was committed there meanwhile, it is retired as committed (E008).
"""

from __future__ import annotations

from reelstore.backend.repo import Repo
from reelstore.kernel import binding
from reelstore.kernel.views import descendants, load_live, terminal_error
from reelstore.sync.fetch import fetch
from reelstore.sync.push import delete, same_view
from reelstore.sync.state import SyncState
from reelstore.sync.transport import Progress


def abort(repo: Repo, name: str, progress: Progress | None = None) -> list[str]:
    """Abort view `name` and its live descendants, removing first the copies of those bound to a remote."""
    live = load_live(repo, name)
    family = [*descendants(repo, live), live]
    remotes = sorted({r for v in family if (r := binding.bound_remote(repo, v.view)) is not None})
    for remote in remotes:
        fetched = fetch(repo, remote, progress)
        if name in fetched.retired:
            raise terminal_error(repo, name)
        state = SyncState(repo)
        try:
            seen = state.seen(remote)
        finally:
            state.close()
        doomed = [
            v.ref
            for v in family
            if binding.bound_remote(repo, v.view) == remote
            and v.ref in seen
            and repo.refs.get(v.ref) is not None
            and same_view(repo, seen[v.ref].target, v.view)
        ]
        if doomed:
            delete(repo, remote, doomed, progress)
    from reelstore.kernel.verbs import abort as kernel_abort  # the kernel's verbs: loaded only to abort

    return kernel_abort(repo, name, cleared=remotes)
