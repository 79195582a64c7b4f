"""Reachability: the one walker gc, prune, fsck, rev-list and pack-objects share.

It follows `references()` of every kind, iteratively (no recursion, no depth cap), visits each object
once, and never skips silently: an object it cannot find or cannot read is reported, so a caller that
deletes (gc, prune) can refuse to when the walk is incomplete.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from reelstore.errors import BadInput, NotFound, StorageError
from reelstore.objects import Delta, Hash, Journal, Object, Put, Record, Tree, View, decode
from reelstore.storage.object_store import ObjectStore
from reelstore.storage.refs import RefStore


@dataclass
class Walk:
    reachable: set[Hash] = field(default_factory=set)
    """Every object reached and read soundly."""
    missing: dict[Hash, str] = field(default_factory=dict)
    """Referenced but absent: id -> who referenced it (an object id or a root's name)."""
    damaged: dict[Hash, str] = field(default_factory=dict)
    """Present but unreadable: id -> the error."""
    hints: dict[Hash, str] = field(default_factory=dict)
    """A name each object was reached under (a tree entry or a delta op), to pack versions together."""
    kinds: dict[Hash, str] = field(default_factory=dict)
    inflight: set[Hash] = field(default_factory=set)
    """gc's fence: reached only from writes not yet referenced by any ref (kept, but not reachable)."""

    @property
    def complete(self) -> bool:
        return not self.missing and not self.damaged


def _named_edges(obj: Object) -> Iterator[tuple[Hash, str]]:
    if isinstance(obj, Tree):
        for name, h in obj.entries:
            yield h, name
    elif isinstance(obj, Delta):
        for op in obj.ops:
            if isinstance(op, Put):
                yield op.id, op.name
    for h in obj.references():
        yield h, ""


def walk(
    store: ObjectStore,
    roots: Iterable[tuple[str, Hash]],
    progress: Callable[[int], None] | None = None,
    on_object: Callable[[Object], None] | None = None,
    known: set[Hash] | None = None,
) -> Walk:
    """Everything reachable from `roots` ((name, id) pairs), with what could not be reached; objects in
    `known` (an earlier walk's) are neither visited nor reported again."""
    result = Walk()
    seen: set[Hash] = set(known) if known else set()
    stack: list[tuple[Hash, str]] = []
    for name, h in roots:
        if h not in seen:
            seen.add(h)
            stack.append((h, name))
    while stack:
        h, via = stack.pop()
        try:
            obj = decode(store.get_raw(h))  # get_raw has re-hashed it
        except NotFound:
            result.missing[h] = via
            continue
        except StorageError as err:
            result.damaged[h] = err.message
            continue
        except BadInput as err:
            result.damaged[h] = f"object {h.hex()} is damaged: {err.message}"
            continue
        result.reachable.add(h)
        result.kinds[h] = obj.kind
        if on_object is not None:
            on_object(obj)
        if progress is not None and len(result.reachable) % 1000 == 0:
            progress(len(result.reachable))
        here = h.hex()
        for child, name in _named_edges(obj):
            if name and child not in result.hints:
                result.hints[child] = name
            if child not in seen:
                seen.add(child)
                stack.append((child, here))
    if progress is not None:
        progress(len(result.reachable))  # the final count, so a "done." line states the whole
    return result


def ref_roots(refs: RefStore, reflog_since_ms: int | None = 0) -> list[tuple[str, Hash]]:
    """Every ref's value, and the old and new ids of its reflog entries made at or after
    `reflog_since_ms` (None: no reflog entries). The store's audit log of verbs is not a root."""
    roots: list[tuple[str, Hash]] = []
    for name in refs.names():
        value = refs.get(name)
        if value is not None:
            roots.append((name, value))
        if reflog_since_ms is None:
            continue
        for n, entry in enumerate(refs.reflog(name)):
            if entry.time_ms >= reflog_since_ms:
                for h in (entry.old, entry.new):
                    if h is not None:
                        roots.append((f"{name}@{{{n}}}", h))
    return roots


def history(store: ObjectStore, starts: Iterable[Hash], limit: int | None = None) -> Iterator[Object]:
    """The hash chains from `starts`, newest first: records by `parent`, journal entries by `prev`,
    views by `base`. Each object once; a missing link ends its chain (fsck reports it)."""
    seen: set[Hash] = set()
    queue = deque(starts)
    count = 0
    while queue:
        h = queue.popleft()
        if h in seen:
            continue
        seen.add(h)
        try:
            obj = store.get(h)
        except NotFound:
            continue
        yield obj
        count += 1
        if limit is not None and count >= limit:
            return
        nxt = predecessor(obj)
        if nxt is not None:
            queue.append(nxt)


def predecessor(obj: Object) -> Hash | None:
    """The object one step back in `obj`'s hash chain (what `NAME~1` names), or None at a chain's root."""
    if isinstance(obj, Record):
        return obj.parent
    if isinstance(obj, Journal):
        return obj.prev
    if isinstance(obj, View):
        return obj.base
    return None
