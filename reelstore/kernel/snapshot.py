"""Snapshots of views, and restoring them.

A snapshot is a ref, `refs/snapshots/NAME`, at one view object: the object already holds everything
the protocol's Snapshot names (namespace root, delta, capabilities, the pending effect buffer with
each Class B effect's version ref), so a ref that keeps it reachable is the whole snapshot, and gc
keeps it for as long as the ref exists. Snapshots stay in this store: push syncs trunks and views only.

Restoring targets the view the snapshot was taken from (or a view named by the caller). A live target
is reset in place: one new view object and one compare-and-swap of its ref, checked in the same step
against its commit target, so the view is either wholly as it was or wholly the snapshot, and a racing
commit and a restore never both land. The view keeps its identity (fork id, initiator); effects it
held that the snapshot does not are dropped, as an abort drops them. A target that is not live is
made anew, as a fork is, with a fresh fork identity. Either way:
- Class A is restored exactly: the view has the snapshot's namespace root.
- Class B effects are re-checked against their targets now; one whose version moved is kept and
  reported by an explicit `RestoreWarning`: committing it would be E002.
- Class C effects are restored pending, never fired by restore: committing the restored view fires
  them, aborting it drops them; the user decides.
An effect that already left this store's hands is never restored a second time: one that a trunk
record since the snapshot's base carries (it was committed, so its drain owns it) or that a live view
other than the target still holds (it would fire twice) is left out and reported. The test is the
effect's content id, so an identical but unrelated effect is left out too: the safe side, said in the
report.
"""

from __future__ import annotations

import secrets
import warnings
from dataclasses import dataclass, field, replace
from typing import Any

from reelstore.adapters.base import adapter
from reelstore.attribution import now_ms
from reelstore.backend.op_log import operation
from reelstore.backend.repo import Repo
from reelstore.codec import freeze
from reelstore.errors import BadInput, Conflict, NotFound, ReelError, ViewTerminal
from reelstore.kernel import admission
from reelstore.kernel.transaction import CAS_ATTEMPTS, backoff, give_up
from reelstore.kernel.views import Live, commit_target, fork_id, live_views, load_live, read_view, trunk_base
from reelstore.objects import Effect, Effects, Hash, Record, View
from reelstore.objects.ref import HEAD_PREFIX, VIEW_PREFIX, check_ref_name, view_ref
from reelstore.objects.view import MAX_APPROVALS

SNAPSHOT_PREFIX = "refs/snapshots/"


class RestoreWarning(UserWarning):
    """A restored Class B effect whose target's version has moved since the snapshot."""


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
        out = {
            "effect": self.effect.hex(),
            "class": self.effect_class,
            "adapter": self.adapter,
            "resource": self.resource,
        }
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
    """Effects not restored: already committed, or still pending in another live view."""
    in_place: bool = False
    """The target view was live and was reset to the snapshot in one atomic step."""
    dropped: list[RestoredEffect] = field(default_factory=list)
    """For a restore in place: effects the view held before that the snapshot does not (gone, as by abort)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "snapshot": self.snapshot,
            "view": self.view,
            "id": self.id.hex(),
            "namespace": self.namespace.hex(),
            "pending": [e.to_json() for e in self.pending],
            "changed": [e.to_json() for e in self.changed],
            "left_out": [e.to_json() for e in self.left_out],
            "in_place": self.in_place,
            "dropped": [e.to_json() for e in self.dropped],
        }


@operation("snapshot")
def take(repo: Repo, view: str, name: str | None = None, force: bool = False) -> Snapshot:
    """Point `refs/snapshots/NAME` (default: the view's name) at view `view`'s current object.
    An existing snapshot of that name is E002 unless `force`."""
    live = load_live(repo, view)
    name = name or view
    ref = snapshot_ref(name)
    old = repo.refs.get(ref)
    if old is not None and not force:
        raise Conflict(
            f"snapshot {name!r} already exists (at {old.hex()[:12]}); pass --force to move it", snapshot=name
        )
    repo.refs.set(ref, live.id, old, message=f"snapshot {view}", principal=repo.principal())
    return Snapshot(name, live.id, view, now_ms())


def list_snapshots(repo: Repo) -> list[Snapshot]:
    out = []
    for ref, h in repo.refs.list(SNAPSHOT_PREFIX):
        view = read_view(repo, h)
        log = repo.refs.reflog(ref)
        out.append(
            Snapshot(ref[len(SNAPSHOT_PREFIX) :], h, str(view.meta.get("name", "")), log[-1].time_ms if log else None)
        )
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
    """Restore snapshot `name` onto view `as_view` (default: the view it was taken from); see the
    module docstring for what happens to each class. A live target is reset in place in one atomic
    step; a target that is not live is made anew. `effects=False` restores Class A only."""
    h = repo.refs.get(snapshot_ref(name))
    if h is None:
        raise NotFound(f"no snapshot named {name!r}", snapshot=name)
    snap = read_view(repo, h)
    target = as_view or str(snap.meta.get("name", "")) or name
    vref = view_ref(target)
    caps = admission.narrow(_parent_caps(repo, snap), admission.view_caps(repo, snap))
    for attempt in range(CAS_ATTEMPTS):
        try:
            live = None if repo.refs.get(vref) is None else load_live(repo, target)
        except (ViewTerminal, NotFound):
            continue  # it ended meanwhile, or its commit had landed and is now retired: look again
        if live is not None and as_view is None and fork_id(live.view) != fork_id(snap):
            raise Conflict(
                f"view {target!r} is live but is not the view snapshot {name!r} was taken from; "
                f"name it with --as {target} to replace it, or restore with --as NEW",
                view=target,
            )
        result = RestoreResult(name, target, h, snap.namespace, in_place=live is not None)
        kept = _restore_effects(repo, snap, live, result) if effects else []
        if live is not None and live.view.effects is not None:
            why = f"pending in view {target!r} before the restore; dropped as an abort drops them"
            result.dropped = [
                _entry(repo.cache.load(eh, Effect), why)
                for eh in repo.cache.load(live.view.effects, Effects).items
                if eh not in kept
            ]
        if kept:
            from reelstore.drain import hold

            hold.check(repo)
        view = replace(
            snap,
            caps=tuple(c.id for c in caps),
            meta=_meta(repo, snap, live, target, name, h),
            effects=_effects_block(repo, snap, kept),
            approvals=_approvals(snap, live),
        )
        repo.cache.save([view])
        try:
            if live is None:
                repo.refs.transaction(f"restore {name}", repo.principal()).create(vref, view.id).commit()
            else:
                tx = repo.refs.transaction(f"restore {name} in place", repo.principal())
                tx.update(vref, view.id, live.id).verify(*commit_target(repo, live.view)).commit()
        except Conflict as exc:
            if give_up(exc, attempt):
                raise
            backoff(attempt)  # the view changed, was made, or its target moved: look again
            continue
        repo.verbs.append("restore" if live is not None else "fork", target, view.id, f"restore {name}")
        result.id = view.id
        for changed in result.changed:
            said = f"Class B effect {changed.effect.hex()[:12]} on {changed.resource}: {changed.why}"
            warnings.warn(RestoreWarning(said), stacklevel=2)
        return result
    raise Conflict(f"view {target!r} kept changing under restore; gave up after {CAS_ATTEMPTS} attempts", view=target)


def _restore_effects(repo: Repo, snap: View, live: Live | None, result: RestoreResult) -> list[Hash]:
    """The snapshot's effects that may be pending again, in order, filling `result`'s lists. One that a
    live view other than the target holds stays there, so no effect ever has two live holders."""
    kept: list[Hash] = []
    if snap.effects is None:
        return kept
    gone = _committed_effects(repo, snap)
    busy = _pending_elsewhere(repo, live.name if live is not None else None)
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
    return kept


def _approvals(snap: View, live: Live | None) -> tuple[Hash, ...]:
    """The approvals and refusals a view reset in place keeps: its own, then the snapshot's. Each is bound
    to the effects and names it judged, so one of another state counts for nothing; a refusal of the
    state restored still holds it, as it would have had the view never changed."""
    if live is None:
        return snap.approvals
    own = live.view.approvals
    return (*own, *(a for a in snap.approvals if a not in own))[:MAX_APPROVALS]


def _meta(repo: Repo, snap: View, live: Live | None, target: str, name: str, h: Hash) -> Any:
    """The restored view's meta: the snapshot's, under the target's identity. A view reset in place
    keeps its own (fork id, start, initiator, merged children), so it stays the same view; a new one
    gets a fresh fork identity, as a fork does."""
    meta = dict(snap.meta)
    if live is None:
        meta.update(fork=secrets.token_hex(16), created=now_ms(), principal=repo.principal())
    else:
        meta.update({k: v for k, v in live.view.meta.items() if k in ("fork", "created", "principal", "merged")})
    meta.update(name=target, restored={"snapshot": name, "from": h.hex()})
    return freeze(meta)


def _entry(e: Effect, why: str = "") -> RestoredEffect:
    return RestoredEffect(e.id, e.effect_class, e.adapter, e.resource, why)


def _parent_caps(repo: Repo, snap: View) -> tuple[Any, ...]:
    """The authority the restored view may have: its parent's now (a trunk's may have narrowed since)."""
    if snap.parent.startswith(HEAD_PREFIX):
        trunk = snap.parent[len(HEAD_PREFIX) :]
        if repo.refs.get(snap.parent) is None:
            raise NotFound(f"the snapshot's trunk {trunk!r} does not exist", trunk=trunk)
        return admission.trunk_caps(repo, trunk)
    if snap.parent.startswith(VIEW_PREFIX):
        parent = snap.parent[len(VIEW_PREFIX) :]
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


def _pending_elsewhere(repo: Repo, skip: str | None) -> dict[Hash, str]:
    out: dict[Hash, str] = {}
    for live in live_views(repo):
        if live.name != skip and live.view.effects is not None:
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
