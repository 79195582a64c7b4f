"""Ref names of views and trunks: `refs/views/NAME` and `refs/heads/TRUNK`."""

from __future__ import annotations

from reelstore.errors import BadInput
from reelstore.storage.refs import check_ref_name

VIEW_PREFIX = "refs/views/"
HEAD_PREFIX = "refs/heads/"


def view_ref(name: str) -> str:
    """The ref of view `name` (E014 if the name cannot be a ref)."""
    if not name or name.startswith("refs/"):
        raise BadInput(f"invalid view name {name!r}")
    return check_ref_name(VIEW_PREFIX + name)


def trunk_ref(trunk: str) -> str:
    """The ref of trunk `trunk` (E014 if the name cannot be a ref)."""
    return check_ref_name(HEAD_PREFIX + trunk)
