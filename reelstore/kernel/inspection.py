"""Reading live views without changing them: `status`, `diff` and the live-view list, as typed results.

Each result is a frozen dataclass of the store's own types (hashes, effects, capabilities, delta ops);
`to_json()` gives the JSON document `reel … --json` prints and the MCP server returns. That shape is a
documented contract shared by the command line and the library's agent server, so it lives with the
result, not in the CLI (the library never imports the CLI); the human-readable text stays in the CLI.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from reelstore.backend.repo import Repo
from reelstore.kernel import admission
from reelstore.kernel.changes import base_namespace, changed, current_delta, namespace, pending_effects
from reelstore.kernel.views import live_views, load_live
from reelstore.objects import Hash

if TYPE_CHECKING:  # a status of a view that changed nothing needs none of their modules
    from reelstore.objects import Capability, DeltaOp, Effect

ChangeStatus = Literal["added", "modified", "removed"]


def _hex(h: Hash | None) -> str | None:
    return h.hex() if h is not None else None


def _op_json(op: DeltaOp) -> dict[str, Any]:
    from reelstore.objects import Put

    return {"op": op.op, "name": op.name, "id": op.id.hex() if isinstance(op, Put) else None}


@dataclass(frozen=True, slots=True)
class ViewStatus:
    """A live view now: where it came from, what it changed, what its commit would fire, and with
    which capabilities."""

    view: str
    id: Hash
    parent: str
    base: Hash | None
    boundary: str
    depth: int
    trunk: str
    changes: tuple[DeltaOp, ...]
    """One `Put` or `Remove` per changed name, in name order."""
    effects: tuple[Effect, ...]
    """The pending effects, in the order a commit would fire them."""
    caps: tuple[Capability, ...]
    merged: tuple[str, ...]
    """Fork ids of the child views already merged into this one."""

    def to_json(self) -> dict[str, Any]:
        return {
            "view": self.view,
            "id": self.id.hex(),
            "parent": self.parent,
            "base": _hex(self.base),
            "boundary": self.boundary,
            "depth": self.depth,
            "trunk": self.trunk,
            "changes": [_op_json(op) for op in self.changes],
            "effects": [
                {
                    "index": i,
                    "id": e.id.hex(),
                    "adapter": e.adapter,
                    "class": e.effect_class,
                    "resource": e.resource,
                    "delivery": e.delivery,
                    "op": e.to_json()["op"],
                }
                for i, e in enumerate(self.effects)
            ],
            "caps": [c.spec() for c in self.caps],
            "merged": list(self.merged),
        }


@dataclass(frozen=True, slots=True)
class NameChange:
    """One name a view changed against its base: the content there before (`old`) and now (`new`)."""

    name: str
    status: ChangeStatus
    old: Hash | None
    new: Hash | None

    def to_json(self) -> dict[str, Any]:
        return {
            "op": "remove" if self.new is None else "put",
            "name": self.name,
            "id": _hex(self.new),
            "old": _hex(self.old),
            "status": self.status,
        }


@dataclass(frozen=True, slots=True)
class ViewSummary:
    """One line of the live-view list: counts instead of the changes and effects themselves."""

    name: str
    id: Hash
    parent: str
    boundary: str
    depth: int
    changes: int
    """How many names the view changed."""
    effects: int
    """How many effects are pending."""
    remote: str | None
    """The remote the view is bound to (its one commit point), if any."""

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "id": self.id.hex(),
            "parent": self.parent,
            "boundary": self.boundary,
            "depth": self.depth,
            "changes": self.changes,
            "effects": self.effects,
            "remote": self.remote,
        }


def status(repo: Repo, name: str) -> ViewStatus:
    """A live view's base, changed names, pending effects in order and capabilities."""
    live = load_live(repo, name)
    view = live.view
    return ViewStatus(
        view=name,
        id=live.id,
        parent=view.parent,
        base=view.base,
        boundary=view.boundary,
        depth=view.depth,
        trunk=live.trunk,
        changes=changed(repo, live),
        effects=tuple(pending_effects(repo, view)),
        caps=admission.view_caps(repo, view),
        merged=tuple(str(m) for m in view.meta.get("merged", ())),
    )


def diff(repo: Repo, name: str) -> list[NameChange]:
    """What view `name` changed relative to its base: one entry per name, in name order."""
    from reelstore.objects import Put

    live = load_live(repo, name, settle=False)
    delta = current_delta(repo, live)
    ns = namespace(repo)
    out = []
    for op in delta.ops:
        old = ns.get(base_namespace(delta), op.name)
        new = op.id if isinstance(op, Put) else None
        status: ChangeStatus = "removed" if new is None else ("added" if old is None else "modified")
        out.append(NameChange(op.name, status, old, new))
    return out


def views(repo: Repo) -> list[ViewSummary]:
    """Every live view, by name, with the remote each is bound to."""
    from reelstore.kernel.binding import bound_remote  # the list's remotes: `reel fork`'s status has none

    out = []
    for live in live_views(repo):
        v = live.view
        out.append(
            ViewSummary(
                live.name,
                live.id,
                v.parent,
                v.boundary,
                v.depth,
                len(changed(repo, live)),
                len(pending_effects(repo, v)),
                bound_remote(repo, v),
            )
        )
    return out
