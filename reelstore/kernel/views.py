"""Live views and terminal ones: loading a view by name, and remembering which views ended and how.

A live view is the ref `refs/views/NAME`. A view ends by commit or abort, which deletes that ref, so
the ref alone cannot tell "never existed" (E001) from "already committed or aborted" (E008). The
verb log answers that: an append-only line per fork, commit and abort in `.reel/logs/VERBS`. It is an
audit trail, not a gc root: it names aborted views' objects without keeping them alive.

A commit's single commit point is the CAS of its target (the trunk, or the parent view). A crash
after that CAS but before the view ref was deleted leaves a *leftover* ref; `load_live` recognises it
(a record on the trunk, or the parent's `merged` list, names the view object) and finishes retiring it.
"""

from __future__ import annotations

import os
import time
import weakref
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TypeVar

from reelstore.errors import BadInput, Conflict, NotFound, StorageError, ViewTerminal
from reelstore.objects import Hash, Object, Record, View
from reelstore.storage.object_store import expect_kind
from reelstore.storage.refs import check_ref_name
from reelstore.storage.repo import Repo

VIEW_PREFIX = "refs/views/"
HEAD_PREFIX = "refs/heads/"
TERMINAL_VERBS = ("commit", "abort")
_MEMORY_LOGS: weakref.WeakKeyDictionary[Repo, list[str]] = weakref.WeakKeyDictionary()
_MEMORY_LAST: weakref.WeakKeyDictionary[Repo, dict[str, str]] = weakref.WeakKeyDictionary()


def view_ref(name: str) -> str:
    """The ref of view `name` (E014 if the name cannot be a ref)."""
    if not name or name.startswith("refs/"):
        raise BadInput(f"invalid view name {name!r}")
    return check_ref_name(VIEW_PREFIX + name)


def trunk_ref(trunk: str) -> str:
    return check_ref_name(HEAD_PREFIX + trunk)


def now_ms() -> int:
    return int(time.time() * 1000)


def principal() -> str:
    """Who acts: REEL_PRINCIPAL, else the login name."""
    return os.environ.get("REEL_PRINCIPAL") or os.environ.get("USER") or "reel"


@dataclass(frozen=True)
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


# The verb log.


def log_verb(repo: Repo, verb: str, name: str, view_id: Hash, detail: str = "") -> None:
    """Append one line `TIME VERB NAME VIEW DETAIL` (durably, on disk)."""
    line = f"{now_ms()} {verb} {name} {view_id.hex()} {detail}".rstrip() + "\n"
    if repo.path is None:
        _MEMORY_LOGS.setdefault(repo, []).append(line)
        _MEMORY_LAST.setdefault(repo, {})[name] = line
        return
    path = repo.path / "logs" / "VERBS"
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, line.encode("utf-8"))
        if repo.config.get_bool("core.fsync", True):
            os.fsync(fd)
    finally:
        os.close(fd)


@dataclass(frozen=True)
class VerbEntry:
    time_ms: int
    verb: str
    name: str
    view: str
    detail: str


def verb_log(repo: Repo) -> Iterator[VerbEntry]:
    """Every verb-log entry, oldest first."""
    if repo.path is None:
        lines = list(_MEMORY_LOGS.get(repo, ()))
    else:
        try:
            lines = (repo.path / "logs" / "VERBS").read_text("utf-8").splitlines()
        except FileNotFoundError:
            lines = []
        except OSError as exc:
            raise StorageError(f"cannot read the verb log: {exc}") from None
    return _parse(lines)


def _parse(lines: Iterable[str]) -> Iterator[VerbEntry]:
    for line in lines:
        parts = line.rstrip("\n").split(" ", 4)
        if len(parts) >= 4 and parts[0].isdigit():
            yield VerbEntry(int(parts[0]), parts[1], parts[2], parts[3], parts[4] if len(parts) > 4 else "")


def last_end(repo: Repo, name: str) -> VerbEntry | None:
    """The newest commit or abort of a view called `name`, if that is the newest thing it did."""
    last = None
    if repo.path is None:
        line = _MEMORY_LAST.get(repo, {}).get(name)
        last = next(_parse([line])) if line is not None else None
    else:
        for entry in verb_log(repo):
            if entry.name == name:
                last = entry
    return last if last is not None and last.verb in TERMINAL_VERBS else None


# Loading views.

_CACHE_SIZE = 4096
_CACHES: weakref.WeakKeyDictionary[Repo, dict[Hash, Object]] = weakref.WeakKeyDictionary()


T = TypeVar("T", bound=Object)


def load(repo: Repo, h: Hash, cls: type[T] = Object) -> T:  # type: ignore[assignment]
    """`repo.objects.get_as(h, cls)`, remembered: objects are immutable, so a decoded one never goes
    stale. The kernel rereads the same views, records and capabilities on every verb."""
    cache = _CACHES.get(repo)
    if cache is None:
        cache = _CACHES[repo] = {}
    obj = cache.get(h)
    if obj is None:
        obj = repo.objects.get(h)
        if len(cache) >= _CACHE_SIZE:
            cache.clear()
        cache[h] = obj
    return expect_kind(obj, cls)


def save(repo: Repo, objects: Iterable[Object]) -> None:
    """Store objects and remember them (blobs excepted: their data may be large)."""
    objects = list(objects)
    repo.objects.put_many(objects)
    cache = _CACHES.get(repo)
    if cache is None:
        cache = _CACHES[repo] = {}
    if len(cache) + len(objects) >= _CACHE_SIZE:
        cache.clear()
    for obj in objects:
        if obj.kind != "blob":
            cache[obj.id] = obj


def read_view(repo: Repo, h: Hash) -> View:
    return load(repo, h, View)


def terminal_error(repo: Repo, name: str) -> ViewTerminal | NotFound:
    end = last_end(repo, name)
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
    target = load(repo, value)
    if isinstance(target, View):
        return fork_id(view) in target.meta.get("merged", ())
    return find_record(repo, view, value, stop=None) is not None


def committed_in(repo: Repo, view: View) -> Hash | None:
    """The record (the view's own, not the trunk's head) or parent view object that already holds
    `view`, if its commit landed."""
    _, value = commit_target(repo, view)
    if value is None:
        return None
    if isinstance(load(repo, value), View):
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
        rec = load(repo, h, Record)
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
    log_verb(repo, "commit", live.name, live.id, where.hex())
    try:
        repo.refs.delete(live.ref, live.id, message=f"retire committed view {live.name}", principal=principal())
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
