"""The namespace map's nodes: the cutting rule that makes the map history-independent, and the
checked fast reader of `tree` nodes. `namespace.py` builds the map operations on these.
"""

from __future__ import annotations

import operator
from typing import NamedTuple

import blake3
import msgpack

from reelstore.errors import BadInput
from reelstore.objects import HASH_SIZE, Hash, Tree
from reelstore.objects.data import MAX_NAME

BOUNDARY_BITS = 5
TARGET_FANOUT = 1 << BOUNDARY_BITS
"""Mean number of entries per node: a name ends a node with probability 1/TARGET_FANOUT."""

MAX_ENTRIES = 512
"""A node is cut after this many entries even without a boundary name, so no node grows unbounded."""

_BELOW = 1 << (8 - BOUNDARY_BITS)

TREE_TAG = b"tree\0"
_MAX_ENTRIES_READ = 1 << 20

Entry = tuple[str, Hash]
Change = tuple[str, "Hash | None"]


class ReadNode(NamedTuple):
    """A node as read back from the store: checked exactly as a decoded `Tree`, built far cheaper."""

    level: int
    entries: tuple[Entry, ...]
    id: Hash


Node = Tree | ReadNode


def is_boundary(name: str, level: int) -> bool:
    """True if `name` ends a node at `level`.

    The rule: d = BLAKE3(UTF-8 of name); the name is a boundary at level L when the top BOUNDARY_BITS
    bits of byte d[L mod 32] are zero (probability 1/TARGET_FANOUT). Each level reads a different
    byte, so the cuts of one level do not correlate with the cuts of the next.
    """
    return blake3.blake3(name.encode("utf-8")).digest()[level % 32] < _BELOW


def parse_node(raw: bytes) -> tuple[int, tuple[Entry, ...]]:
    """(level, entries) of the canonical bytes of a `tree` (ids as plain bytes); E014 for anything else.

    Accepts exactly what `decode` accepts as a Tree (bounded, strictly increasing non-empty names of
    at most MAX_NAME characters, 32-byte ids, no empty inner node, byte-identical re-encoding), at a
    tenth of the cost: reading nodes is what every namespace operation spends its time on.
    """
    if not raw.startswith(TREE_TAG):
        kind = raw.split(b"\0", 1)[0][:16].decode("utf-8", "replace")
        raise BadInput(f"a {kind!r} object, not a namespace tree")
    body = raw[len(TREE_TAG) :]
    try:
        doc = msgpack.unpackb(body, raw=False, use_list=False, strict_map_key=True)
    except (ValueError, TypeError, msgpack.UnpackException) as exc:
        raise BadInput(f"tree body is not canonical msgpack: {exc}") from None
    if type(doc) is not dict or len(doc) != 2:
        raise BadInput("tree body must be a map of entries and level")
    level, items = doc.get("level"), doc.get("entries")
    if type(level) is not int or not 0 <= level <= 64 or type(items) is not tuple or len(items) > _MAX_ENTRIES_READ:
        raise BadInput("tree body must hold a level in [0, 64] and a list of entries")
    if not items:
        if level > 0:
            raise BadInput("an inner tree node cannot be empty")
        names, values = (), ()
    else:
        if set(map(type, items)) != {tuple} or set(map(len, items)) != {2}:
            raise BadInput("tree entries must be [name, hash] pairs")
        names, values = zip(*items)
        if set(map(type, names)) != {str} or min(map(len, names)) < 1 or max(map(len, names)) > MAX_NAME:
            raise BadInput(f"tree entry names must be non-empty strings of at most {MAX_NAME} characters")
        if set(map(type, values)) != {bytes} or set(map(len, values)) != {HASH_SIZE}:
            raise BadInput("tree entry values must be 32-byte hashes")
        if not all(map(operator.lt, names, names[1:])):
            raise BadInput("tree entries must be strictly increasing by name")
    if msgpack.packb({"entries": items, "level": level}, use_bin_type=True) != body:
        raise BadInput("tree is not in canonical form")
    return level, items


class Chunker:
    """Cuts a stream of sorted entries into the nodes of one level."""

    __slots__ = ("level", "buf", "nodes")

    def __init__(self, level: int) -> None:
        self.level = level
        self.buf: list[Entry] = []
        self.nodes: list[Tree] = []

    def add(self, entry: Entry) -> None:
        self.buf.append(entry)
        if len(self.buf) >= MAX_ENTRIES or is_boundary(entry[0], self.level):
            self.cut()

    def cut(self) -> None:
        if self.buf:
            self.nodes.append(Tree(self.level, tuple(self.buf)))
            self.buf = []
