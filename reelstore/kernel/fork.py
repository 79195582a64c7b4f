"""`fork`: a new view over a trunk or a live view, one view object and one ref.

Apart from the commit machinery (drain, adapters, hooks, transactions) in `kernel.verbs`, so `reel
fork` imports only what a fork runs.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from reelstore.attribution import now_ms
from reelstore.backend.op_log import operation
from reelstore.backend.repo import Repo
from reelstore.codec import freeze
from reelstore.errors import BadInput, Conflict, ForkDepthExceeded, LockHeld
from reelstore.kernel import admission
from reelstore.kernel.views import Live, load_live, terminal_error
from reelstore.objects import Capability, Hash, Record, View
from reelstore.objects.ref import HEAD_PREFIX, VIEW_PREFIX, trunk_ref, view_ref
from reelstore.objects.view import BOUNDARIES, MAX_DEPTH


@operation("fork")
def fork(
    repo: Repo,
    name: str,
    source: str | None = None,
    caps: Sequence[Capability] | None = None,
    boundary: str | None = None,
) -> Live:
    """A new view `name` over a trunk or a live view: one view object and one ref, whatever the
    namespace's size. Caps default to the source's; a wider one is E009, depth past 64 is E005."""
    ref = view_ref(name)
    source = source or HEAD_PREFIX + repo.trunk
    if boundary is not None and boundary not in BOUNDARIES:
        raise BadInput(f"boundary must be one of {', '.join(BOUNDARIES)}, not {boundary!r}")
    parent_ref, base, ns_root, parent_caps, depth, trunk = _fork_source(repo, source)
    if depth + 1 > MAX_DEPTH:
        raise ForkDepthExceeded(f"forking {source!r} would make a view {depth + 1} deep; the limit is {MAX_DEPTH}")
    chosen = parent_caps if caps is None else admission.narrow(parent_caps, caps)
    who = repo.principal()
    meta = {"name": name, "fork": os.urandom(16).hex(), "trunk": trunk, "created": now_ms(), "principal": who}
    view = View(
        parent=parent_ref,
        base=base,
        namespace=ns_root,
        delta=None,
        caps=tuple(c.id for c in chosen),
        effects=None,
        boundary=boundary or ("autonomous" if parent_ref.startswith(HEAD_PREFIX) else "isolated"),
        depth=depth + 1,
        meta=freeze(meta),
    )
    try:
        with repo.objects.batch():
            repo.objects.reuse(chosen)  # the trunk's or the source's: usually stored long ago
            repo.objects.put_many([view])
            repo.refs.transaction(f"fork {name} from {source}", who).create(ref, view.id).commit()
    except Conflict as exc:
        if isinstance(exc, LockHeld):
            raise
        raise Conflict(f"a view named {name!r} already exists", view=name) from None
    repo.verbs.append("fork", name, view.id, parent_ref)
    return Live(name, view)


def _fork_source(repo: Repo, source: str) -> tuple[str, Hash, Hash, tuple[Capability, ...], int, str]:
    """(parent ref, base object, namespace, caps, depth, trunk) of a fork's source. `refs/heads/X` is
    only ever the trunk and `refs/views/X` only the view; a bare name that is both is E014, so a view
    named like a trunk never silently stands in for it."""
    only = None
    for prefix in (VIEW_PREFIX, HEAD_PREFIX):
        if source.startswith(prefix):
            source, only = source[len(prefix) :], prefix
    is_view = only != HEAD_PREFIX and repo.refs.get(view_ref(source)) is not None
    if is_view and only is None and repo.refs.get(trunk_ref(source)) is not None:
        raise BadInput(f"{source!r} is both a trunk and a view; say {HEAD_PREFIX}{source} or {VIEW_PREFIX}{source}")
    if is_view:
        live = load_live(repo, source)
        caps = admission.view_caps(repo, live.view)
        return live.ref, live.id, live.view.namespace, caps, live.view.depth, live.trunk
    head = repo.refs.get(trunk_ref(source)) if only != VIEW_PREFIX else None
    if head is None:
        raise terminal_error(repo, source)
    rec = repo.cache.load(head, Record)  # in a long-lived process, often the record it just committed
    return HEAD_PREFIX + source, head, rec.namespace, admission.trunk_caps(repo, source), 0, source
