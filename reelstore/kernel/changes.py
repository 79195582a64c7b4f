"""What a live view changed: its delta against its base and its pending effects.

`reel fork` (which prints the new view's status) and `reel status` read these without the commit
machinery, so this module imports no drain, adapter, hook or transaction code, and the namespace map
only when a view really changed names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from reelstore.backend.repo import Repo
from reelstore.errors import BadInput
from reelstore.kernel.views import Live
from reelstore.objects import Hash, Object

if TYPE_CHECKING:  # each loaded where it is met: a fresh view has no delta, no effects and no changed name
    from reelstore.namespace.tree import Namespace
    from reelstore.objects import Delta, DeltaOp, Effect, View


def _new_namespace(repo: Repo) -> Namespace:
    from reelstore.namespace.tree import Namespace

    return Namespace(repo.objects)


def namespace(repo: Repo) -> Namespace:
    """The store's namespace map (one per open store, so its node cache is shared)."""
    return repo.attached(_new_namespace)


def empty_namespace() -> Hash:
    from reelstore.namespace.tree import Namespace

    return Namespace.empty()


def current_delta(repo: Repo, live: Live) -> Delta:
    """What the view changed since its base. An open view stores none (`delta` nil): it is the diff
    of the base's namespace and the view's, O(changes · log n). A committed view object carries it."""
    from reelstore.objects import Delta, Put, Remove

    if live.view.delta is not None:
        delta = repo.cache.load(live.view.delta, Object)
        if isinstance(delta, Delta):
            return delta
        raise BadInput(f"view {live.name} names a {delta.kind} as its delta")
    base = repo.cache.load(live.view.base, Object) if live.view.base is not None else None
    base_ns = getattr(base, "namespace", None)
    if base_ns is None:
        base_ns = empty_namespace()
    if base_ns == live.view.namespace:  # nothing changed yet (a fresh fork): no map to walk
        return Delta(base_ns, ())
    ops = tuple(
        Put("put", name, new) if new is not None else Remove("remove", name)
        for name, _, new in namespace(repo).diff(base_ns, live.view.namespace)
    )
    return Delta(base_ns, ops)


def changed(repo: Repo, live: Live) -> tuple[DeltaOp, ...]:
    """The operations of `current_delta`, without building a delta for a view that changed nothing."""
    if live.view.delta is None and live.view.base is not None:
        base = repo.cache.load(live.view.base, Object)
        if getattr(base, "namespace", None) == live.view.namespace:
            return ()
    return current_delta(repo, live).ops


def base_namespace(delta: Delta) -> Hash:
    """The namespace a delta applies to; one without a base changed the empty map (as `current_delta` builds it)."""
    return delta.base if delta.base is not None else empty_namespace()


def pending_effects(repo: Repo, view: View) -> list[Effect]:
    """The view's buffered effects, in submission order."""
    if view.effects is None:
        return []
    from reelstore.objects import Effect, Effects

    return [repo.cache.load(h, Effect) for h in repo.cache.load(view.effects, Effects).items]
