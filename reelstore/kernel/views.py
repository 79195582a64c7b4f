"""Live views and terminal ones: loading a view by name, and the view graph (parents, children, where
a commit landed).

A live view is the ref `refs/views/NAME`. A view ends by commit or abort, which deletes that ref; the
store's verb log (`repo.verbs`) then tells "never existed" (E001) from "already committed or aborted"
(E008).

A commit's single commit point is the CAS of its target (the trunk, or the parent view). A crash
after that CAS but before the view ref was deleted leaves a *leftover* ref; `load_live` recognises it
(a record on the trunk, or the parent's `merged` list, names the view object) and finishes retiring it.
"""

from __future__ import annotations

from dataclasses import dataclass

from reelstore.backend.repo import Repo
from reelstore.errors import Conflict, NotFound, ViewTerminal
from reelstore.objects import Hash, Object, Record, View
from reelstore.objects.ref import VIEW_PREFIX, trunk_ref, view_ref


@dataclass(frozen=True, slots=True)
class Live:
    """A live view: its name, its ref and the view object the ref points at."""

    name: str
    view: View

    @property
    def ref(self) -> str:
        return VIEW_PREFIX + self.name

    @property
    def id(self) -> Hash:
        return self.view.id

    @property
    def trunk(self) -> str:
        return str(self.view.meta.get("trunk", ""))


def initiator(repo: Repo, view: View) -> str:
    """Who started `view` (its `principal`, recorded at fork), whom its effects name; this store's
    principal for a view that recorded none."""
    return str(view.meta.get("principal", repo.principal()))


def read_view(repo: Repo, h: Hash) -> View:
    return repo.cache.load(h, View)


def terminal_error(repo: Repo, name: str) -> ViewTerminal | NotFound:
    end = repo.verbs.last_end(name)
    if end is None:
        return NotFound(f"no view named {name!r}", view=name)
    how = "committed" if end.verb == "commit" else "aborted"
    extra = f" as {end.detail.split()[0]}" if end.verb == "commit" and end.detail else ""
    return ViewTerminal(f"view {name!r} was {how}{extra}", view=name, state=how)


def load_live(repo: Repo, name: str, *, settle: bool = True) -> Live:
    """The live view `name`: E001 if there never was one, E008 if it was committed or aborted.

    With `settle`, a leftover ref of a view whose commit already landed is retired first, so every
    mutating verb sees a crashed commit as the commit it was.
    """
    ref = view_ref(name)
    h = repo.refs.get(ref)
    if h is None:
        raise terminal_error(repo, name)
    live = Live(name, read_view(repo, h))
    if settle:
        where = committed_in(repo, live.view)
        if where is not None:
            retire(repo, live, where)
            raise terminal_error(repo, name)
    return live


def commit_target(repo: Repo, view: View) -> tuple[str, Hash | None]:
    """The ref a commit of `view` moves (its parent view's, for an isolated child of a view; its
    trunk's otherwise), and that ref's current value."""
    if view.boundary == "isolated" and view.parent.startswith(VIEW_PREFIX):
        return view.parent, repo.refs.get(view.parent)
    ref = trunk_ref(str(view.meta.get("trunk", "")))
    return ref, repo.refs.get(ref)


def is_child_of(repo: Repo, view: View, parent: View) -> bool:
    """Was `view` forked from this very parent view (not an earlier view that had the same name)?"""
    if view.parent != VIEW_PREFIX + str(parent.meta.get("name", "")) or view.base is None:
        return False
    return fork_id(read_view(repo, view.base)) == fork_id(parent)


def landed_in(repo: Repo, view: View, value: Hash) -> bool:
    """Does the target's `value` (a parent view object or a trunk record) already hold `view`?"""
    target = repo.cache.load(value, Object)
    if isinstance(target, View):
        return fork_id(view) in target.meta.get("merged", ())
    return find_record(repo, view, value, stop=None) is not None


def committed_in(repo: Repo, view: View) -> Hash | None:
    """The record (the view's own, not the trunk's head) or parent view object that already holds
    `view`, if its commit landed."""
    _, value = commit_target(repo, view)
    if value is None:
        return None
    if isinstance(repo.cache.load(value, Object), View):
        return value if landed_in(repo, view, value) else None
    return find_record(repo, view, value, stop=None)


def fork_id(view: View) -> str:
    """The identity every object of one view shares (a fresh random id per fork): a later object of a
    view whose earlier object was committed is recognised as committed too."""
    return str(view.meta.get("fork", "")) or view.id.hex()


def find_record(repo: Repo, view: View, head: Hash, stop: Hash | None) -> Hash | None:
    """Walk the trunk from `head` back to `stop`, the view's trunk base, or the root; the record
    committing this view (any object of it), if any. Costs one read per record since the fork."""
    base = trunk_base(repo, view)
    fork = fork_id(view)
    h: Hash | None = head
    while h is not None and h != stop:
        rec = repo.cache.load(h, Record)
        if rec.view == view.id or (rec.view is not None and fork_id(read_view(repo, rec.view)) == fork):
            return h
        if h == base:
            return None
        h = rec.parent
    return None


def trunk_base(repo: Repo, view: View) -> Hash | None:
    """The trunk record a view descends from: its own base, or its nearest trunk-forked ancestor's."""
    seen = 0
    while view.parent.startswith(VIEW_PREFIX) and view.base is not None and seen < 64:
        view = read_view(repo, view.base)
        seen += 1
    return view.base


def retire(repo: Repo, live: Live, where: Hash) -> None:
    """Finish a commit whose target CAS landed: log it and delete the leftover ref."""
    repo.verbs.append("commit", live.name, live.id, where.hex())
    try:
        repo.refs.delete(live.ref, live.id, message=f"retire committed view {live.name}", principal=repo.principal())
    except (NotFound, Conflict):
        return


def live_views(repo: Repo) -> list[Live]:
    """Every live view, by name."""
    out = []
    for ref, h in repo.refs.list(VIEW_PREFIX):
        out.append(Live(ref[len(VIEW_PREFIX) :], read_view(repo, h)))
    return out


def descendants(repo: Repo, live: Live) -> list[Live]:
    """Live views forked (directly or not) from the live view `live`, deepest first."""
    children: dict[str, list[Live]] = {}
    for v in live_views(repo):
        children.setdefault(v.view.parent, []).append(v)
    out: list[Live] = []

    def walk(parent: Live, depth: int) -> None:
        if depth > 64:
            return
        for child in children.get(parent.ref, ()):
            if is_child_of(repo, child.view, parent.view):
                walk(child, depth + 1)
                out.append(child)

    walk(live, 0)
    return out
