"""Snapshots of views, and restoring them: the reel protocol's t_012–t_014.

A snapshot is a ref, `refs/snapshots/NAME`, at one view object: the object already holds everything
the protocol's Snapshot names (namespace root, delta, capabilities, the pending effect buffer with
each Class B effect's version ref), so a ref that keeps it reachable is the whole snapshot, and gc
keeps it for as long as the ref exists. Snapshots stay in this store: push syncs trunks and views only.

Restoring writes one new view object and one ref, as a fork does, with a fresh fork identity:
- Class A is restored exactly: the new view has the snapshot's namespace root (t_012).
- Class B effects are re-checked against their targets now; one whose version moved is kept and
  reported by an explicit `RestoreWarning` (t_013): committing it would be E002.
- Class C effects are restored pending, never fired by restore: committing the restored view fires
  them, aborting it drops them; the user decides (t_014).
An effect that already left this store's hands is never restored a second time: one that a trunk
record since the snapshot's base carries (it was committed, so its drain owns it) or that a live view
still holds (it would fire twice) is left out and reported. The test is the effect's content id, so
an identical but unrelated effect is left out too: the safe side, said in the report.
"""

from __future__ import annotations

import secrets
import warnings
from dataclasses import dataclass, field, replace
from typing import Any

from reelstore.adapters.base import adapter
from reelstore.codec import freeze
from reelstore.errors import BadInput, Conflict, NotFound, ReelError
from reelstore.kernel import admission
from reelstore.kernel.names import HEAD_PREFIX, VIEW_PREFIX, view_ref
from reelstore.kernel.views import live_views, load_live, read_view, trunk_base
from reelstore.objects import Effect, Effects, Hash, Record, View
from reelstore.stamp import now_ms
from reelstore.storage.op_log import operation
from reelstore.storage.refs import check_ref_name
from reelstore.storage.repo import Repo

SNAPSHOT_PREFIX = "refs/snapshots/"


class RestoreWarning(UserWarning):
    """A restored Class B effect whose target's version has moved since the snapshot (t_013)."""


def snapshot_ref(name: str) -> str:
    return check_ref_name(SNAPSHOT_PREFIX + name)


@dataclass(frozen=True)
class Snapshot:
    name: str
    id: Hash
    view: str
    """The name the view had when the snapshot was taken."""
    time_ms: int | None

    def to_json(self) -> dict[str, Any]:
        return {"snapshot": self.name, "id": self.id.hex(), "view": self.view, "time_ms": self.time_ms}


@dataclass(frozen=True)
class RestoredEffect:
    effect: Hash
    effect_class: str
    adapter: str
    resource: str
    why: str = ""
    """For a changed or left-out effect: what was found."""

    def to_json(self) -> dict[str, Any]:
        out = {"effect": self.effect.hex(), "class": self.effect_class, "adapter": self.adapter,
               "resource": self.resource}
        if self.why:
            out["why"] = self.why
        return out


@dataclass
class RestoreResult:
    snapshot: str
    view: str
    id: Hash
    namespace: Hash
    pending: list[RestoredEffect] = field(default_factory=list)
    """Effects restored pending, in order: they fire only if the user commits the view."""
    changed: list[RestoredEffect] = field(default_factory=list)
    """Class B effects (also in `pending`) whose version ref no longer holds: commit would be E002."""
    left_out: list[RestoredEffect] = field(default_factory=list)
    """Effects not restored: already committed, or still pending in a live view."""

    def to_json(self) -> dict[str, Any]:
        return {"snapshot": self.snapshot, "view": self.view, "id": self.id.hex(), "namespace": self.namespace.hex(),
                "pending": [e.to_json() for e in self.pending], "changed": [e.to_json() for e in self.changed],
                "left_out": [e.to_json() for e in self.left_out]}


@operation("snapshot")
def take(repo: Repo, view: str, name: str | None = None, force: bool = False) -> Snapshot:
    """Point `refs/snapshots/NAME` (default: the view's name) at view `view`'s current object.
    An existing snapshot of that name is E002 unless `force`."""
    live = load_live(repo, view)
    name = name or view
    ref = snapshot_ref(name)
    old = repo.refs.get(ref)
    if old is not None and not force:
        raise Conflict(f"snapshot {name!r} already exists (at {old.hex()[:12]}); pass --force to move it",
                       snapshot=name)
    repo.refs.set(ref, live.id, old, message=f"snapshot {view}", principal=repo.principal())
    return Snapshot(name, live.id, view, now_ms())


def list_snapshots(repo: Repo) -> list[Snapshot]:
    out = []
    for ref, h in repo.refs.list(SNAPSHOT_PREFIX):
        view = read_view(repo, h)
        log = repo.refs.reflog(ref)
        out.append(Snapshot(ref[len(SNAPSHOT_PREFIX):], h, str(view.meta.get("name", "")),
                            log[-1].time_ms if log else None))
    return out


@operation("snapshot")
def delete(repo: Repo, name: str) -> Hash:
    ref = snapshot_ref(name)
    old = repo.refs.get(ref)
    if old is None:
        raise NotFound(f"no snapshot named {name!r}", snapshot=name)
    repo.refs.delete(ref, old, message="snapshot delete", principal=repo.principal())
    return old


@operation("restore")
def restore(repo: Repo, name: str, as_view: str | None = None, *, effects: bool = True) -> RestoreResult:
    """A new live view `as_view` (default: the snapshot's name) holding the snapshot's state; see the
    module docstring for what happens to each class. `effects=False` restores Class A only."""
    ref = snapshot_ref(name)
    h = repo.refs.get(ref)
    if h is None:
        raise NotFound(f"no snapshot named {name!r}", snapshot=name)
    snap = read_view(repo, h)
    target = as_view or name
    vref = view_ref(target)
    parent_caps = _parent_caps(repo, snap)
    caps = admission.narrow(parent_caps, admission.view_caps(repo, snap))
    result = RestoreResult(name, target, h, snap.namespace)
    kept: list[Hash] = []
    if effects and snap.effects is not None:
        gone = _committed_effects(repo, snap)
        busy = _pending_elsewhere(repo)
        for eh in repo.cache.load(snap.effects, Effects).items:
            e = repo.cache.load(eh, Effect)
            where = gone.get(eh) or busy.get(eh)
            if where is not None:
                result.left_out.append(_entry(e, where))
                continue
            kept.append(eh)
            result.pending.append(_entry(e))
            if e.effect_class == "B":
                why = _precondition(repo, e)
                if why:
                    result.changed.append(_entry(e, why))
    if kept:
        from reelstore.drain import hold

        hold.check(repo)
    meta = dict(snap.meta)
    meta.update(name=target, fork=secrets.token_hex(16), created=now_ms(), principal=repo.principal(),
                restored={"snapshot": name, "from": h.hex()})
    view = replace(snap, caps=tuple(c.id for c in caps), meta=freeze(meta),
                   effects=_effects_block(repo, snap, kept))
    repo.cache.save([view])
    try:
        repo.refs.set(vref, view.id, None, message=f"restore {name}", principal=repo.principal())
    except Conflict:
        raise Conflict(f"a view named {target!r} already exists; restore with --as NAME", view=target) from None
    repo.verbs.append("fork", target, view.id, f"restore {name}")
    result.id = view.id
    for changed in result.changed:
        said = f"Class B effect {changed.effect.hex()[:12]} on {changed.resource}: {changed.why}"
        warnings.warn(RestoreWarning(said), stacklevel=2)
    return result


def _entry(e: Effect, why: str = "") -> RestoredEffect:
    return RestoredEffect(e.id, e.effect_class, e.adapter, e.resource, why)


def _parent_caps(repo: Repo, snap: View) -> tuple[Any, ...]:
    """The authority the restored view may have: its parent's now (a trunk's may have narrowed since)."""
    if snap.parent.startswith(HEAD_PREFIX):
        trunk = snap.parent[len(HEAD_PREFIX):]
        if repo.refs.get(snap.parent) is None:
            raise NotFound(f"the snapshot's trunk {trunk!r} does not exist", trunk=trunk)
        return admission.trunk_caps(repo, trunk)
    if snap.parent.startswith(VIEW_PREFIX):
        parent = snap.parent[len(VIEW_PREFIX):]
        if repo.refs.get(snap.parent) is None:
            raise NotFound(f"the snapshot's parent view {parent!r} is no longer live", view=parent)
        return admission.view_caps(repo, load_live(repo, parent).view)
    raise BadInput(f"the snapshot's parent {snap.parent!r} is neither a trunk nor a view")


def _committed_effects(repo: Repo, snap: View) -> dict[Hash, str]:
    """Effects carried by the records of the snapshot's trunk since its base, newest first."""
    trunk = str(snap.meta.get("trunk", "")) or repo.trunk
    head = repo.refs.get(HEAD_PREFIX + trunk)
    stop = trunk_base(repo, snap)
    out: dict[Hash, str] = {}
    h = head
    while h is not None and h != stop:
        rec = repo.cache.load(h, Record)
        if rec.effects is not None:
            for eh in repo.cache.load(rec.effects, Effects).items:
                out.setdefault(eh, f"already committed in record {h.hex()[:12]}")
        h = rec.parent
    return out


def _pending_elsewhere(repo: Repo) -> dict[Hash, str]:
    out: dict[Hash, str] = {}
    for live in live_views(repo):
        if live.view.effects is not None:
            for eh in repo.cache.load(live.view.effects, Effects).items:
                out.setdefault(eh, f"still pending in live view {live.name!r}")
    return out


def _precondition(repo: Repo, e: Effect) -> str:
    """'' if the Class B precondition holds now, else what was found (a moved version, or why it
    could not be checked)."""
    try:
        adapter(e.adapter, repo).check_precondition(e)
    except Conflict as err:
        return f"version changed since the snapshot: {err.message}"
    except ReelError as err:
        return f"could not be checked: {err.code}: {err.message}"
    return ""


def _effects_block(repo: Repo, snap: View, kept: list[Hash]) -> Hash | None:
    if not kept:
        return None
    if snap.effects is not None and len(kept) == len(repo.cache.load(snap.effects, Effects).items):
        return snap.effects
    block = Effects(tuple(kept))
    repo.cache.save([block])
    return block.id
