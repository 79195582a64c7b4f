"""Ref: a name under `refs/` that points at an object. These are the rules of the name itself, which
every door checks before anything reads or writes a ref: which names are valid (git's rules, so refs
survive a round trip through git), which kind of object each namespace must point at, and how a
view's and a trunk's names become refs. How refs are kept on disk is the backend's business.
"""

from __future__ import annotations

from reelstore.errors import BadInput

MAX_REF = 1024
VIEW_PREFIX = "refs/views/"
HEAD_PREFIX = "refs/heads/"

_BAD = frozenset(map(chr, range(0x21))) | frozenset("\x7f~^:?*[\\")
"""Characters no ref name holds: control characters, space, DEL and `~^:?*[\\`."""

REQUIRED_KIND = {
    "refs/heads/": "record",
    "refs/views/": "view",
    "refs/drains/": "journal",
    "refs/snapshots/": "view",
    "refs/ops/": "opevent",
}
"""The object kind each namespace's refs must point at; a namespace not listed (remote-tracking refs,
tags) may point at any kind."""


def check_ref_name(name: str) -> str:
    """Validate a full ref name (E014): under refs/, no `..`, no control characters, no `.lock`…"""
    problem = None
    if not name.startswith("refs/") or len(name) > MAX_REF:
        problem = "must start with refs/ and be at most 1024 characters"
    elif not _BAD.isdisjoint(name) or "@{" in name:
        problem = "contains a control character, a space or one of ~^:?*[\\ or @{"
    elif ".." in name or "//" in name or name.endswith("/") or name.endswith("."):
        problem = "contains '..' or '//' or ends with '/' or '.'"
    else:
        for part in name.split("/"):
            if part.startswith(".") or part.startswith("-") or part.endswith(".lock"):
                problem = "has a component starting with '.' or '-' or ending with '.lock'"
                break
    if problem is None:
        try:
            name.encode("utf-8")
        except UnicodeEncodeError:
            problem = "is not valid UTF-8"
    if problem:
        raise BadInput(f"invalid ref name {name!r}: {problem}")
    return name


def required_kind(name: str) -> str | None:
    """The object kind a ref of this namespace must point at (None: any kind, e.g. remote-tracking)."""
    for prefix, kind in REQUIRED_KIND.items():
        if name.startswith(prefix):
            return kind
    return None


def check_target(name: str, kind: str) -> None:
    """E014 unless an object of `kind` may be the target of ref `name`: a trunk holds a record, a view
    ref or a snapshot a view, a drain ref a journal entry, an operation's ref an operator event. Each
    reader of a namespace relies on its kind, so a wrong one is refused before it is written."""
    want = required_kind(name)
    if want is not None and kind != want:
        raise BadInput(f"ref {name} must point at a {want}, not a {kind}", ref=name)


def view_ref(name: str) -> str:
    """The ref of view `name` (E014 if the name cannot be a ref)."""
    if not name or name.startswith("refs/"):
        raise BadInput(f"invalid view name {name!r}")
    return check_ref_name(VIEW_PREFIX + name)


def trunk_ref(trunk: str) -> str:
    """The ref of trunk `trunk` (E014 if the name cannot be a ref)."""
    return check_ref_name(HEAD_PREFIX + trunk)
