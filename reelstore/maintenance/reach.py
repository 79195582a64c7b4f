"""Reachability: the one walker gc, prune, fsck, rev-list and pack-objects share.

It follows `references()` of every kind, iteratively (no recursion, no depth cap), visits each object
once, and never skips silently: an object it cannot find or cannot read is reported, so a caller that
deletes (gc, prune) can refuse to when the walk is incomplete.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

import msgpack

from reelstore.backend.object_store import ObjectStore
from reelstore.backend.refdb.refs import RefStore
from reelstore.errors import BadInput, NotFound, StorageError
from reelstore.objects import Hash, Tree, decode
from reelstore.objects.hash import as_hash

if TYPE_CHECKING:
    from reelstore.objects import Object


@dataclass(slots=True)
class Walk:
    """What a walk reached and what it could not."""

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


def _named_edges(obj: Object) -> Iterable[tuple[Hash, str]]:
    if isinstance(obj, Tree):
        # A tree's references are its entries: each once, with its name.
        return [(h, name) for name, h in obj.entries]
    edges: list[tuple[Hash, str]] = []
    if obj.kind == "delta":
        from reelstore.objects import Delta, Put  # loaded only where a delta is met

        edges = [(op.id, op.name) for op in cast(Delta, obj).ops if isinstance(op, Put)]
    return edges + [(h, "") for h in obj.references()]


def _tree_edges(raw: bytes) -> tuple[tuple[bytes, ...], tuple[str, ...]] | None:
    """A tree's entries (ids, names) read straight from its msgpack body, without building and
    re-encoding the object: the bytes have hashed to their id, and only decoded objects are stored.
    The ids come as the plain bytes msgpack made (each of 32). None for anything but a tree of the
    expected shape (the caller then decodes it in full)."""
    if not raw.startswith(b"tree\0"):
        return None
    try:
        body = msgpack.unpackb(memoryview(raw)[5:], use_list=False, raw=False, strict_map_key=True)
    except Exception:  # msgpack raises several unrelated types for malformed input
        return None
    entries = body.get("entries") if type(body) is dict and len(body) == 2 and "level" in body else None
    if type(entries) is not tuple:
        return None
    if not entries:
        return (), ()
    if set(map(type, entries)) != {tuple} or set(map(len, entries)) != {2}:
        return None
    names, ids = zip(*entries)
    if set(map(type, names)) != {str} or set(map(type, ids)) != {bytes} or set(map(len, ids)) != {32}:
        return None
    return ids, names


def walk(
    store: ObjectStore,
    roots: Iterable[tuple[str, Hash]],
    progress: Callable[[int], None] | None = None,
    on_object: Callable[[Object], None] | None = None,
    known: set[Hash] | None = None,
    leaves: AbstractSet[bytes] | None = None,
    read: Callable[[Hash], bytes] | None = None,
) -> Walk:
    """Everything reachable from `roots` ((name, id) pairs), with what could not be reached; objects in
    `known` (an earlier walk's) are neither visited nor reported again.

    `leaves` are ids the caller has found stored as a kind that references nothing, in a pack whose
    checksums it verified (gc, from the entries' headers): they count as reached without being read,
    so `on_object` never sees them. Whoever copies them checks each one's CRC as it does. With
    `leaves`, an object's edges are taken in bulk (set operations), a child's hint is the last name it
    was reached under, and the ids reached through trees are the plain 32 bytes (equal to, and
    hashed as, their Hash). `read` replaces `store.get_raw` (gc reads trees straight from the pack
    entry its listing found; it must re-hash as get_raw does)."""
    result = Walk()
    get_raw = store.get_raw if read is None else read
    seen: set[Hash] = set(known) if known else set()
    stack: list[tuple[Hash, str]] = []
    ticks = 1000
    hints, reachable = result.hints, result.reachable
    counted = reachable if leaves is None else seen  # what progress counts (both grow in place)
    for name, h in roots:
        if h not in seen:
            seen.add(h)
            stack.append((h, name))
    while stack:
        h, via = stack.pop()
        if leaves is not None and h in leaves:
            continue  # reached: it is in `seen` (see the end)
        try:
            raw = get_raw(h)  # get_raw has re-hashed it
            light = _tree_edges(raw) if on_object is None else None
            if light is None:
                obj = decode(raw)
                kind, edges = obj.kind, _named_edges(obj)
                if on_object is not None:
                    on_object(obj)
                ids, names = [c for c, _ in edges], tuple(n for _, n in edges)
            elif leaves is None:
                kind, ids, names = "tree", list(map(as_hash, light[0])), light[1]
            else:
                kind, (ids, names) = "tree", cast(tuple[list[Hash], tuple[str, ...]], light)
        except NotFound:
            result.missing[h] = via
            continue
        except StorageError as err:
            result.damaged[h] = err.message
            continue
        except BadInput as err:
            result.damaged[h] = f"object {h.hex()} is damaged: {err.message}"
            continue
        if leaves is None:
            reachable.add(h)
        result.kinds[h] = kind
        if progress is not None and len(counted) >= ticks:
            progress(len(counted))
            ticks = len(counted) + 1000
        here = h.hex()
        if leaves is None:
            for child, name in zip(ids, names):
                if name and child not in hints:
                    hints[child] = name
                if child not in seen:
                    seen.add(child)
                    stack.append((child, here))
            continue
        fresh = set(ids)
        fresh -= seen
        if not fresh:
            continue
        seen |= fresh
        hints.update(zip(ids, names))
        reached = fresh & leaves
        if len(reached) < len(fresh):
            for child in ids:
                if child in fresh and child not in reached:
                    stack.append((child, here))
                    fresh.discard(child)
    if leaves is not None:
        # With `leaves`, every id seen is reached (a leaf at once, anything else when read) unless it
        # proved missing or damaged, or was known: the reached set is `seen` less those, not a second
        # set grown beside it (one insertion per edge fewer, into a set as large as the store's half).
        if known:
            seen -= known
        seen.difference_update(result.missing, result.damaged)
        result.reachable = seen
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
    from reelstore.objects import Journal, Record, View  # the kinds a chain is made of, loaded when asked

    if isinstance(obj, Record):
        return obj.parent
    if isinstance(obj, Journal):
        return obj.prev
    if isinstance(obj, View):
        return obj.base
    return None
