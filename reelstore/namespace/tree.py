"""The namespace map: a persistent, history-independent ordered map name -> id, stored as `tree` nodes.

It is a prolly tree. Each level is the sorted sequence of its entries cut into nodes by a rule that
looks only at the entries themselves (see `is_boundary`), so the same contents always give the same
nodes and the same root id, whatever order the writes came in. Level 0 holds (name, value id); level
L + 1 holds (first name of a level-L node, that node's id). A change re-cuts only the nodes around
it, so a point update writes about one node per level, and two roots share every node outside their
differences, which lets `diff` skip identical subtrees by id.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from typing import Any, TypeVar

from reelstore.backend.object_store import ObjectStore
from reelstore.errors import BadInput, NotFound, StorageError
from reelstore.namespace.node import (
    MAX_ENTRIES,
    TREE_TAG,
    Change,
    Chunker,
    Entry,
    Node,
    ReadNode,
    is_boundary,
    parse_node,
)
from reelstore.objects import Hash, Tree
from reelstore.objects.block import v_hash
from reelstore.objects.data import MAX_NAME
from reelstore.objects.hash import as_hash

_EMPTY = Tree(0, ())
_INNER_CACHE = 4096
_LEAF_CACHE = 1024
_COUNT_CACHE = 1 << 17
_V = TypeVar("_V")


class Namespace:
    """A persistent, history-independent ordered map name -> Hash stored as `tree` objects.

    Nodes are immutable, so an instance caches decoded nodes and subtree counts by id; it is safe to
    keep one per object store for its whole life.
    """

    def __init__(self, objects: ObjectStore) -> None:
        self.objects = objects
        self._inner: OrderedDict[Hash, Node] = OrderedDict()
        self._leaves: OrderedDict[Hash, Node] = OrderedDict()
        self._counts: OrderedDict[Hash, int] = OrderedDict()

    @staticmethod
    def empty() -> Hash:
        """The id of the empty map: the level-0 node with no entries (what `Repo.init` writes)."""
        return _EMPTY.id

    # Reading

    def get(self, root: Hash, name: str) -> Hash | None:
        node = self._root(root)
        while node.level > 0:
            node = self._child(node, _cover(node, name))
        i = bisect_left(node.entries, name, key=_name)
        if i < len(node.entries) and node.entries[i][0] == name:
            return as_hash(node.entries[i][1])
        return None

    def items(self, root: Hash, prefix: str = "") -> Iterator[tuple[str, Hash]]:
        """Every (name, id) in name order; with `prefix`, only names starting with it (found by seek)."""
        last: str | None = None
        first = True
        for leaf in self._level_nodes(self._root(root), 0, prefix):
            start = bisect_left(leaf.entries, prefix, key=_name) if first else 0
            first = False
            for name, value in leaf.entries[start:]:
                if not name.startswith(prefix):
                    return
                if last is not None and name <= last:
                    raise StorageError(f"namespace {root.hex()} is damaged: names out of order at {name!r}")
                last = name
                yield name, as_hash(value)

    def count(self, root: Hash) -> int:
        return self._count(self._root(root))

    def verify(self, root: Hash) -> int:
        """Check a whole map is in its one canonical form (for fsck and fetched data); return its size.

        Beyond what every read checks (levels, first names, order), this re-applies the cutting rule
        to every node, so a tree that would break history independence is reported as damaged (E007).
        """
        top = self._root(root)
        if top.level > 0 and len(top.entries) < 2:
            raise StorageError(f"namespace {root.hex()} is damaged: an inner root has a single child")
        count, last = 0, None
        for level in range(top.level, -1, -1):
            nodes = list(self._level_nodes(top, level, "")) if level < top.level else [top]
            for k, node in enumerate(nodes):
                cuts = [is_boundary(name, level) for name, _ in node.entries]
                tail_ok = k == len(nodes) - 1 or cuts[-1] or len(node.entries) == MAX_ENTRIES
                if any(cuts[:-1]) or len(node.entries) > MAX_ENTRIES or not tail_ok:
                    raise StorageError(f"namespace node {node.id.hex()} is damaged: not cut by the boundary rule")
            if level == 0:
                for name, _ in (e for node in nodes for e in node.entries):
                    if last is not None and name <= last:
                        raise StorageError(f"namespace {root.hex()} is damaged: names out of order at {name!r}")
                    last = name
                    count += 1
        return count

    def diff(self, a: Hash, b: Hash) -> Iterator[tuple[str, Hash | None, Hash | None]]:
        """(name, id in a, id in b) for every name whose id differs, in name order.

        Both sides are walked as streams of subtrees and entries; two subtrees with the same id are
        skipped whole, so the cost follows the number of changes, not the size of the maps.
        """
        if a == b:
            return
        sa, sb = self._stream(a), self._stream(b)
        while sa and sb:
            ka, ha, la = sa[-1]
            kb, hb, lb = sb[-1]
            if la >= 0 and lb >= 0 and ha == hb:
                sa.pop()
                sb.pop()
            elif ka < kb:
                if la < 0:
                    sa.pop()
                    yield ka, as_hash(ha), None
                else:
                    self._expand(sa)
            elif kb < ka:
                if lb < 0:
                    sb.pop()
                    yield kb, None, as_hash(hb)
                else:
                    self._expand(sb)
            elif la < 0 and lb < 0:
                sa.pop()
                sb.pop()
                if ha != hb:
                    yield ka, as_hash(ha), as_hash(hb)
            elif la > lb:
                self._expand(sa)
            elif lb > la:
                self._expand(sb)
            else:
                self._expand(sa)
                self._expand(sb)
        for name, value in self._drain(sa):
            yield name, as_hash(value), None
        for name, value in self._drain(sb):
            yield name, None, as_hash(value)

    # Writing

    def update(self, root: Hash, changes: Mapping[str, Hash | None]) -> Hash:
        """Put (id) or remove (None) many names at once; write only the new nodes; return the new root.

        Removing an absent name is a no-op. An unchanged map returns `root` itself.
        """
        pending = _checked_changes(changes)
        top = self._root(root)
        if not pending:
            return root
        fresh: dict[Hash, Tree] = {}
        for level in range(top.level + 1):
            pending = self._apply_level(top, level, pending, fresh)
            if not pending:
                return root
        seq = {top.entries[0][0]: top.id} if top.entries else {}
        for name, value in pending:
            if value is None:
                seq.pop(name, None)
            else:
                seq[name] = value
        new_root = self._grow(sorted(seq.items()), top.level, fresh)
        self._write(new_root, fresh)
        return new_root.id

    def _apply_level(self, top: Node, level: int, changes: list[Change], fresh: dict[Hash, Tree]) -> list[Change]:
        """Apply sorted changes to the entries of `level`; return the changes that makes to `level + 1`.

        Re-cutting starts at the node that covers a change and runs until the new cuts meet an old
        node boundary again: after that point every node is as before.
        """
        old: dict[str, Hash] = {}
        out: dict[str, Hash | None] = {}
        i, n = 0, len(changes)
        while i < n:
            chunker = Chunker(level)
            nodes = self._level_nodes(top, level, changes[i][0])
            node: Node | None = next(nodes)
            while node is not None:
                after = next(nodes, None)
                limit = after.entries[0][0] if after is not None else None
                j = i
                while j < n and (limit is None or changes[j][0] < limit):
                    j += 1
                _merge(chunker, node.entries, changes[i:j])
                i = j
                if node.entries:
                    old[node.entries[0][0]] = node.id
                    out[node.entries[0][0]] = None
                if after is None:
                    chunker.cut()
                elif not chunker.buf:
                    break
                node = after
            for made in chunker.nodes:
                fresh[made.id] = made
                out[made.entries[0][0]] = made.id
        return [(name, value) for name, value in sorted(out.items()) if old.get(name) != value]

    def _grow(self, seq: list[Entry], level: int, fresh: dict[Hash, Tree]) -> Node:
        """The root over the new top level: cut upward while a level has several nodes, then drop
        single-entry inner roots, so the root is always the lowest level that fits in one node."""
        if not seq:
            return _EMPTY
        while len(seq) > 1:
            level += 1
            chunker = Chunker(level)
            for entry in seq:
                chunker.add(entry)
            chunker.cut()
            for made in chunker.nodes:
                fresh[made.id] = made
            seq = [(made.entries[0][0], made.id) for made in chunker.nodes]
        node = fresh.get(seq[0][1]) or self._node(seq[0][1])
        while node.level > 0 and len(node.entries) == 1:
            child = node.entries[0][1]
            node = fresh.get(child) or self._child(node, 0)
        return node

    def _write(self, root: Node, fresh: dict[Hash, Tree]) -> None:
        """Store the new nodes reachable from `root`, children before parents."""
        if root is _EMPTY or root.id == _EMPTY.id:
            self.objects.put_many([_EMPTY])
            return
        found: list[Tree] = []
        todo = [fresh[root.id]] if root.id in fresh else []
        seen: set[Hash] = set()
        while todo:
            node = todo.pop()
            if node.id in seen:
                continue
            seen.add(node.id)
            found.append(node)
            if node.level > 0:
                todo.extend(fresh[h] for _, h in node.entries if h in fresh)
        found.sort(key=lambda t: t.level)
        self.objects.put_many(found)
        for node in found:
            self._remember(node)

    # Walking

    def _root(self, root: Hash) -> Node:
        if root == _EMPTY.id:
            return _EMPTY
        return self._node(root, top=True)

    def _node(self, h: Hash, top: bool = False) -> Node:
        """A node by id, from the cache or read and checked. A bad root is the caller's mistake
        (E001 absent, E014 not a tree); a bad node below it means the tree is damaged (E007)."""
        node = self._inner.get(h) or self._leaves.get(h)
        if node is not None:
            return node
        h = as_hash(h)
        try:
            raw = self.objects.get_raw(h)
        except NotFound:
            if top:
                raise
            raise StorageError(f"namespace node {h.hex()} is missing", id=h) from None
        try:
            node = ReadNode(*parse_node(raw), h)
        except BadInput as exc:
            if top and not raw.startswith(TREE_TAG):
                raise
            raise StorageError(f"namespace node {h.hex()} is damaged: {exc.message}", id=h) from None
        self._remember(node)
        return node

    def _child(self, parent: Node, index: int) -> Node:
        """The child at `index`, checked against its parent: one level down, same first name, not empty."""
        name, h = parent.entries[index]
        return self._checked_node(h, parent.level - 1, name)

    def _checked_node(self, h: Hash, level: int, first: str) -> Node:
        node = self._node(h)
        if node.level != level or not node.entries or node.entries[0][0] != first:
            raise StorageError(
                f"namespace node {h.hex()} is damaged: expected a non-empty level-{level} node starting at {first!r}",
                id=h,
            )
        return node

    def _remember(self, node: Node) -> None:
        cache, limit = (self._inner, _INNER_CACHE) if node.level else (self._leaves, _LEAF_CACHE)
        _bounded_put(cache, limit, node.id, node)

    def _level_nodes(self, top: Node, level: int, key: str) -> Iterator[Node]:
        """The nodes of `level` in order, from the one that covers `key` to the last."""
        stack: list[list[Any]] = []
        node = top
        while node.level > level:
            index = _cover(node, key)
            stack.append([node, index])
            node = self._child(node, index)
        yield node
        while stack:
            frame = stack[-1]
            frame[1] += 1
            if frame[1] >= len(frame[0].entries):
                stack.pop()
                continue
            node = self._child(frame[0], frame[1])
            while node.level > level:
                stack.append([node, 0])
                node = self._child(node, 0)
            yield node

    def _count(self, node: Node) -> int:
        """Entries under `node`; children's counts are remembered by id, so recounting a map that
        shares most nodes with one counted before reads only the nodes that differ."""
        if node.level == 0:
            return len(node.entries)
        total = 0
        for i, (_, h) in enumerate(node.entries):
            known = self._counts.get(h)
            if known is None:
                known = self._count(self._child(node, i))
                _bounded_put(self._counts, _COUNT_CACHE, h, known)
            total += known
        return total

    def _stream(self, root: Hash) -> list[tuple[str, Hash, int]]:
        """A diff stream: a stack (last = next) of (first name, id, level), level -1 for an entry."""
        top = self._root(root)
        return [(top.entries[0][0], top.id, top.level)] if top.entries else []

    def _expand(self, stack: list[tuple[str, Hash, int]]) -> None:
        first, h, level = stack.pop()
        node = self._checked_node(h, level, first)
        below = level - 1 if level > 0 else -1
        stack.extend((name, value, below) for name, value in reversed(node.entries))

    def _drain(self, stack: list[tuple[str, Hash, int]]) -> Iterator[Entry]:
        while stack:
            if stack[-1][2] < 0:
                name, value, _ = stack.pop()
                yield name, value
            else:
                self._expand(stack)


def _bounded_put(cache: OrderedDict[Hash, _V], limit: int, key: Hash, value: _V) -> None:
    """Insert, dropping the oldest entry when full; each step is one atomic call, so threads may share it."""
    if len(cache) >= limit:
        try:
            cache.popitem(last=False)
        except KeyError:
            pass
    cache[key] = value


def _name(entry: Entry) -> str:
    return entry[0]


def _cover(node: Node, key: str) -> int:
    """Index of the child whose range holds `key`: the last one starting at or before it (or the first)."""
    return max(bisect_right(node.entries, key, key=_name) - 1, 0)


def _merge(chunker: Chunker, entries: tuple[Entry, ...], changes: list[Change]) -> None:
    """Feed `entries` with sorted `changes` applied to the chunker, in name order."""
    i, n = 0, len(entries)
    for name, value in changes:
        while i < n and entries[i][0] < name:
            chunker.add(entries[i])
            i += 1
        if i < n and entries[i][0] == name:
            i += 1
        if value is not None:
            chunker.add((name, value))
    while i < n:
        chunker.add(entries[i])
        i += 1


def _checked_changes(changes: Mapping[str, Hash | None]) -> list[Change]:
    """The changes as a list sorted by name, every name and id checked (E014 on a bad one)."""
    items = list(changes.items())
    for k, (name, value) in enumerate(items):
        if (
            type(name) is not str
            or not 0 < len(name) <= MAX_NAME
            or not name.isascii()
            or not (value is None or type(value) is Hash)
        ):
            items[k] = _checked(name, value)
    items.sort()
    return items


def _checked(name: object, value: object) -> Change:
    if type(name) is not str or not 0 < len(name) <= MAX_NAME:
        if not isinstance(name, str) or not 0 < len(name) <= MAX_NAME:
            raise BadInput(f"a namespace name must be a non-empty string of at most {MAX_NAME} characters")
        name = str(name)
    if not name.isascii():
        try:
            name.encode("utf-8")
        except UnicodeEncodeError:
            raise BadInput(f"namespace name {name!r} is not valid Unicode") from None
    if value is None or type(value) is Hash:
        return name, value
    return name, v_hash(value, f"namespace value of {name!r}")
