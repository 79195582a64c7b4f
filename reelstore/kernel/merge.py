"""Deltas and the three-way replay a commit does when its target moved since the fork.

A view's delta says, per name, what the view changed relative to its base namespace. Replaying it
onto a newer target is safe exactly when, for every name the view changed, the target still holds
what the base held or already holds what the view wants. That check is O(changes · log n): it reads
only the changed names, never the whole namespace.
"""

from __future__ import annotations

from collections.abc import Mapping

from reelstore.errors import Conflict
from reelstore.namespace.tree import Namespace
from reelstore.objects import Delta, Hash, Put
from reelstore.wording import listed

Changes = Mapping[str, "Hash | None"]


def changes_of(delta: Delta | None) -> dict[str, Hash | None]:
    """A delta's operations as {name: new id, or None for a removal}."""
    if delta is None:
        return {}
    return {op.name: (op.id if isinstance(op, Put) else None) for op in delta.ops}


def conflicts(ns: Namespace, base: Hash, onto: Hash, changes: Changes) -> list[str]:
    """Names the view changed that the target also changed, to something else."""
    if base == onto:
        return []
    out = []
    for name, want in changes.items():
        theirs = ns.get(onto, name)
        if theirs != want and theirs != ns.get(base, name):
            out.append(name)
    return out


def replay(ns: Namespace, base: Hash, onto: Hash, changes: Changes, what: str) -> Hash:
    """The namespace `onto` with `changes` applied, or E002 (nothing written) on a name conflict."""
    clash = conflicts(ns, base, onto, changes)
    if clash:
        shown = listed(clash, 5)
        raise Conflict(f"{what} changed the same names since the fork: {shown}", names=clash)
    return ns.update(onto, dict(changes)) if changes else onto
