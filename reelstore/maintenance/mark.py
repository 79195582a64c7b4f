"""gc's mark: what is reachable from the refs and young reflog entries (leaves the backend names counted
unread, trees read straight from their entries), then the fence against concurrent writers. The
backend's gc calls it, through `marker`, once it has listed its candidates."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from collections.abc import Set as AbstractSet

from reelstore.backend.repo import Repo
from reelstore.backend.upkeep import Mark, Progress
from reelstore.errors import StorageError
from reelstore.maintenance.age import DEFAULT_REFLOG_EXPIRE, config_cutoff
from reelstore.maintenance.reach import Walk, ref_roots, walk
from reelstore.objects import Hash


def require_complete(w: Walk, what: str) -> None:
    if w.complete:
        return
    bad = [f"missing {h.hex()} (from {via})" for h, via in list(w.missing.items())[:5]]
    bad += [f"damaged {h.hex()}: {msg}" for h, msg in list(w.damaged.items())[:5]]
    raise StorageError(
        f"{what} refused: the reachable set is incomplete ({'; '.join(bad)}); run `reel fsck`",
        missing=len(w.missing),
        damaged=len(w.damaged),
    )


def marker(repo: Repo, now: float, progress: Progress | None, what: str) -> Mark:
    """The mark a backend's gc (or prune) calls: `mark`, refusing (E007, naming `what`) if the live set
    is incomplete, since deleting then could drop what a ref needs."""

    def run(leaves: AbstractSet[bytes] | None, read: Callable[[Hash], bytes] | None) -> Walk:
        w = mark(repo, now, progress, leaves, read)
        require_complete(w, what)
        return w

    return run


def mark(
    repo: Repo,
    now: float,
    progress: Progress | None,
    leaves: AbstractSet[bytes] | None = None,
    read: Callable[[Hash], bytes] | None = None,
) -> Walk:
    """Everything reachable from the refs and young reflog entries, then the fence (see `_fence`)."""
    since = config_cutoff(repo, "gc.reflogExpire", DEFAULT_REFLOG_EXPIRE, now)
    since_ms = 0 if since is None else int(since * 1000)
    tick = (lambda n: progress("marking", n, None)) if progress else None
    roots = ref_roots(repo.refs, since_ms)
    w = walk(repo.objects, roots, progress=tick, leaves=leaves, read=read)
    _fence(repo, w, roots, since_ms, leaves, read)
    return w


FENCE_ROUNDS = 3


def _fence(
    repo: Repo,
    w: Walk,
    roots: list[tuple[str, Hash]],
    since_ms: int,
    leaves: AbstractSet[bytes] | None,
    read: Callable[[Hash], bytes] | None = None,
) -> None:
    """After marking, add what concurrent writers may reference next: every id a live writer registered
    and has not yet referenced from a landed ref transaction (backend/inflight.py), then the refs as they
    are now. One round suffices for a writer that registers: if gc reads its registration before it
    settles, its objects are kept; if after, its ref move landed before gc re-reads the refs. So an
    object listed as a candidate before the mark and unreachable after the fence is not about to be
    referenced by a write that began before the listing. Up to FENCE_ROUNDS rounds are read until two
    readings of the refs agree, which also catches an object moving between two refs mid-reading for a
    writer that does not register."""
    before = roots
    for _ in range(FENCE_ROUNDS):
        protected = repo.objects.protected()
        now = ref_roots(repo.refs, since_ms)
        if not any(map(_unknown(w), itertools.chain((h for _, h in now), protected))):
            # Nothing new since the mark (the usual case): no walk, and no copy of the reached set.
            if now == before:
                return
            before = now
            continue
        done = w.reachable | w.inflight | set(w.missing) | set(w.damaged)
        moved = walk(repo.objects, [(n, h) for n, h in now if h not in done], known=done, leaves=leaves, read=read)
        done |= moved.reachable | set(moved.missing) | set(moved.damaged)
        pending = walk(
            repo.objects, [("an in-flight write", h) for h in protected - done], known=done, leaves=leaves, read=read
        )
        # An in-flight write may not be on disk yet (or ever, if its writer fails), or be caught between
        # its pack's rename and its index's (then it reads as unusable, not absent): what its walk misses
        # is not damage; what it reaches is kept. Real damage is fsck's to name.
        pending.missing.clear()
        pending.damaged.clear()
        w.inflight |= pending.reachable
        for more in (moved, pending):
            if more is moved:
                w.reachable |= more.reachable
            w.kinds.update(more.kinds)
            w.damaged.update(more.damaged)
            w.missing.update(more.missing)
            for h, name in more.hints.items():
                w.hints.setdefault(h, name)
        if now == before:
            return
        before = now


def _unknown(w: Walk) -> Callable[[bytes], bool]:
    """Whether an id is not yet reached, kept in flight, missing or damaged in `w`."""
    return lambda h: not (h in w.reachable or h in w.inflight or h in w.missing or h in w.damaged)
