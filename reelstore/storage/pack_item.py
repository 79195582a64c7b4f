"""What the pack writer takes and gives (PackItem, PackOptions, PackResult), and the dictionary rule that
both the writer and the copy plan for reused entries follow."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from reelstore.objects import Hash


class PackItem:
    """One object to pack: id, canonical bytes, mtime (seconds) and an optional name hint for deltas.

    A large object may come as `load` (a callable returning its canonical bytes) and its `kind`
    instead of `raw`: the writer then reads it only when its turn comes and drops it once no later
    entry can use it as a base, so a pack of any size is written in bounded memory.

    This and the two classes below are plain classes, not dataclasses: gc and sync build them in
    processes that otherwise never import `dataclasses`, whose class creation costs ~0.5 ms each."""

    __slots__ = ("id", "raw", "mtime", "hint", "kind", "load")

    def __init__(self, id: Hash, raw: bytes, mtime: int, hint: str = "", kind: str = "",
                 load: Callable[[], bytes] | None = None) -> None:
        self.id, self.raw, self.mtime, self.hint, self.kind, self.load = id, raw, mtime, hint, kind, load


class PackOptions:
    __slots__ = ("level", "depth", "window", "min_delta")

    def __init__(self, level: int = 3, depth: int = 50, window: int = 3, min_delta: int = 64) -> None:
        self.level = level
        self.depth = depth
        """Longest chain of base entries a delta may sit on."""
        self.window = window
        """How many earlier entries of the same group are tried as a base."""
        self.min_delta = min_delta
        """Bodies smaller than this are never delta-compressed (the dictionary serves them better)."""


class PackResult:
    __slots__ = ("name", "pack_path", "idx_path", "count", "checksum", "size", "methods")

    def __init__(self, name: str, pack_path: Path | None, idx_path: Path | None, count: int, checksum: bytes,
                 size: int = 0, methods: dict[str, int] | None = None) -> None:
        self.name, self.pack_path, self.idx_path, self.count = name, pack_path, idx_path, count
        self.checksum, self.size = checksum, size
        self.methods: dict[str, int] = {} if methods is None else methods


DICT_MAX = 8192
"""Bodies up to this size are compressed with the pack's dictionary when it has one."""
