"""`reel diff A B`: what two runs did differently, names and effects: fork, run twice, diff.

A and B are views or records (any name `reel` resolves: a view, a trunk, a record id or prefix). Names
are compared by the two namespaces. Effects are aligned as sequences by what they touch (adapter and
resource), so an inserted or dropped effect does not make every later one look changed; aligned
effects whose operations differ are `changed`, with a line diff of their operations.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from typing import Any, Literal

from reelstore.backend.repo import Repo
from reelstore.codec import thaw
from reelstore.errors import BadInput
from reelstore.kernel.inspection import ChangeStatus, NameChange
from reelstore.namespace.tree import Namespace
from reelstore.objects import Effect, Effects, Hash, Record, View
from reelstore.objects.ref import view_ref


@dataclass(frozen=True)
class EffectChange:
    """Two aligned effects (or one, added or removed) and how they differ."""

    status: Literal["same", "changed", "added", "removed"]
    """same, changed, added (only in B) or removed (only in A)."""
    a: Effect | None
    b: Effect | None
    diff: str = ""

    def to_json(self) -> dict[str, Any]:
        def side(e: Effect | None) -> dict[str, Any] | None:
            return (
                None
                if e is None
                else {
                    "id": e.id.hex(),
                    "adapter": e.adapter,
                    "resource": e.resource,
                    "class": e.effect_class,
                    "op": thaw(e.op),
                }
            )

        return {"status": self.status, "a": side(self.a), "b": side(self.b), "diff": self.diff}


@dataclass(frozen=True)
class RunDiff:
    """What run `b` did differently from run `a`: each name's content in A (`old`) and B (`new`), and
    the effects aligned."""

    a: str
    b: str
    names: tuple[NameChange, ...]
    effects: tuple[EffectChange, ...]

    def to_json(self) -> dict[str, Any]:
        names = [
            {
                "status": n.status,
                "name": n.name,
                "a": n.old.hex() if n.old else None,
                "b": n.new.hex() if n.new else None,
            }
            for n in self.names
        ]
        return {"a": self.a, "b": self.b, "names": names, "effects": [e.to_json() for e in self.effects]}


def _state(repo: Repo, name: str) -> tuple[Hash, Hash | None]:
    """(namespace root, effects block) of a view (live, by name) or of any record or view object."""
    if repo.refs.get(view_ref(name)) is not None:
        obj: Any = repo.objects.get(repo.refs[view_ref(name)])
    else:
        obj = repo.objects.get(repo.resolve(name))
    if isinstance(obj, (View, Record)):
        return obj.namespace, obj.effects
    raise BadInput(f"{name} is a {obj.kind}; diff compares views and records")


def _effects(repo: Repo, block: Hash | None) -> list[Effect]:
    if block is None:
        return []
    return [repo.objects.get_as(h, Effect) for h in repo.objects.get_as(block, Effects).items]


def _op_lines(e: Effect) -> list[str]:
    return json.dumps(thaw(e.op), indent=1, sort_keys=True, ensure_ascii=False).splitlines()


def diff_runs(repo: Repo, a: str, b: str) -> RunDiff:
    """`reel diff A B`: names by the two namespaces, effects aligned by what they touch."""
    (ns_a, fx_a), (ns_b, fx_b) = _state(repo, a), _state(repo, b)
    names = []
    for name, old, new in Namespace(repo.objects).diff(ns_a, ns_b):
        status: ChangeStatus = "added" if old is None else "removed" if new is None else "modified"
        names.append(NameChange(name, status, old, new))
    effects: list[EffectChange] = []
    ea, eb = _effects(repo, fx_a), _effects(repo, fx_b)
    keys_a = [(e.adapter, e.resource) for e in ea]
    keys_b = [(e.adapter, e.resource) for e in eb]
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=keys_a, b=keys_b, autojunk=False).get_opcodes():
        if tag == "equal":
            for x, y in zip(ea[i1:i2], eb[j1:j2]):
                effects.append(_pair(x, y))
            continue
        effects += [EffectChange("removed", x, None) for x in ea[i1:i2]]
        effects += [EffectChange("added", None, y) for y in eb[j1:j2]]
    return RunDiff(a, b, tuple(names), tuple(effects))


def _pair(x: Effect, y: Effect) -> EffectChange:
    if x.id == y.id or (x.op == y.op and x.effect_class == y.effect_class):
        return EffectChange("same", x, y)
    lines = difflib.unified_diff(_op_lines(x), _op_lines(y), "a", "b", lineterm="")
    return EffectChange("changed", x, y, "\n".join(lines))
