"""How the ref commands read their arguments: ref names (short or full), new values and old values."""

from __future__ import annotations

from reelstore.backend.repo import Repo
from reelstore.errors import BadInput
from reelstore.objects import ZERO_HEX, Hash
from reelstore.objects.hash import is_full_hex
from reelstore.objects.ref import check_ref_name


def full_ref(repo: Repo, name: str) -> str:
    """`refs/…` as given (validated), or the existing ref a short name finds, searched as git does."""
    if name.startswith("refs/"):
        return check_ref_name(name)
    found = repo.ref_name(name)
    if found is None:
        raise BadInput(f"{name!r} names no existing ref; give a full name under refs/ to create one")
    return found


def is_zero(text: str) -> bool:
    """The empty string or 64 zeros: as an old value, 'must not exist'; as a new value, 'delete'."""
    return text == "" or text == ZERO_HEX


def revision(repo: Repo, text: str) -> Hash:
    """The object a revision names. A full id goes straight to the store, which is the answer the
    revision parser gives it, so the commonest argument loads no parser."""
    if is_full_hex(text):
        return repo.resolve(text)
    from reelstore import revisions

    return revisions.resolve(repo, text)


def new_value(repo: Repo, text: str) -> Hash | None:
    """A value to store: any name that resolves to an existing object; None for zeros (delete)."""
    return None if is_zero(text) else revision(repo, text)


def old_value(repo: Repo, text: str) -> Hash | None:
    """An expected value: a full id (the object need not exist), None for zeros, else any resolvable name."""
    if is_zero(text):
        return None
    if is_full_hex(text):
        return Hash.from_hex(text)
    return revision(repo, text)


def trunk_namespace(repo: Repo, name: str) -> Hash | None:
    """The namespace root of trunk NAME's head (`NAME` or `refs/heads/NAME`) when NAME is not a live
    view, so `reel ls main` and `reel get main x` read a trunk; None when NAME is a view (or nothing)."""
    bare = name.removeprefix("refs/heads/")
    if name == bare and repo.refs.get(f"refs/views/{name}") is not None:
        return None
    try:
        head = repo.refs.get(f"refs/heads/{bare}")
    except BadInput:
        return None
    if head is None:
        return None
    from reelstore.objects import Record

    return repo.objects.get_as(head, Record).namespace
