"""Commit and abort as every door runs them (the `reel` command, `Store`, `AsyncStore`, the MCP server).

The kernel's verbs check a commit point but cannot reach one: a commit into a trunk that tracks a
remote must first win that remote's trunk compare-and-swap, and an abort of a view bound to a remote
must first delete its copy there. Both need this package's transport, which sits above the kernel;
so the choice of commit point and its fence live here, the lowest layer that can own them, and no
door decides it for itself. A door that committed locally instead would send the effects and leave
its trunk diverged from the remote's.

Nothing here loads the transport unless a remote is involved: a store without remotes pays for a
config read and a binding lookup only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from reelstore.backend.repo import Repo
from reelstore.errors import BadInput
from reelstore.kernel import binding
from reelstore.kernel import verbs as kernel
from reelstore.kernel.views import descendants, load_live
from reelstore.objects import Hash
from reelstore.objects.ref import VIEW_PREFIX
from reelstore.sync.retry import check_retries, retrying

Fence = Callable[[str, Hash, Hash], None]


def commit_remote(repo: Repo, name: str, remote: str | None = None) -> str | None:
    """The remote a commit of view `name` must win first: `remote` if given, else the remote its trunk
    tracks; None for a commit into a parent view (it moves no trunk) or an untracked trunk."""
    if remote:
        return remote
    live = load_live(repo, name, settle=False)
    if live.view.boundary == "isolated" and live.view.parent.startswith(VIEW_PREFIX):
        return None
    return binding.tracked_remote(repo, live.trunk)


def commit(
    repo: Repo,
    name: str,
    message: str = "",
    *,
    remote: str | None = None,
    fence: Fence | None = None,
    author: str | None = None,
    retry: int = 0,
) -> kernel.CommitResult:
    """Commit view `name` at its commit point: with `remote` (default: the one its trunk tracks) the
    record first wins that remote's trunk by compare-and-swap (E015 if it cannot, and nothing is
    committed or sent); only then does the local trunk move and the drain run. A caller's own `fence`
    replaces the remote one (tests and embedders). The result names the remote and its notes.

    `retry` (`commit --retry`): after a lost race at the remote, fetch and try again, at most that
    many more times (`sync.retry`); each lost try is a note. E014 for a commit fenced on no remote."""
    check_retries(retry)
    lost: list[str] = []
    if fence is None:
        remote = commit_remote(repo, name, remote)
        if remote:
            from reelstore.sync.push import remote_fence  # on use: the transport loads dulwich

            made = remote_fence(repo, remote)
            res = _tries(repo, remote, retry, lambda: kernel.commit(repo, name, message, author, fence=made), lost)
            notes = (*lost, *(made.result.notes if made.result is not None else ()))
            return replace(res, remote=remote, notes=notes)
    fenced = getattr(fence, "remote", None)
    if retry and not isinstance(fenced, str):
        raise BadInput(
            "retry applies only to a commit fenced on a remote (--remote REMOTE, or a trunk that tracks one)",
            field="retry",
        )
    res = _tries(repo, fenced, retry, lambda: kernel.commit(repo, name, message, author, fence=fence), lost)
    return replace(res, remote=fenced, notes=tuple(lost))


def _tries(
    repo: Repo, remote: str | None, retry: int, once: Callable[[], kernel.CommitResult], lost: list[str]
) -> kernel.CommitResult:
    return retrying(repo, remote, retry, once, lost=lost) if retry and remote else once()


def abort(repo: Repo, name: str) -> list[str]:
    """Abort view `name` and its live descendants; those bound to a remote lose their copy there
    first, so no other store can commit them afterwards (E010 / E015 if it cannot be removed, and
    nothing is aborted)."""
    live = load_live(repo, name)
    if any(binding.bound_remote(repo, v.view) for v in [*descendants(repo, live), live]):
        from reelstore.sync.abort import abort as remote_abort  # on use: it fetches, which loads dulwich

        return remote_abort(repo, name)
    return kernel.abort(repo, name)
