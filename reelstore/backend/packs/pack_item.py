"""What the pack writer takes and gives (PackItem, PackOptions, PackResult), and the dictionary rule that
both the writer and the copy plan for reused entries follow."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from reelstore.objects import Hash


@dataclass(slots=True)
class PackItem:
    """One object to pack: id, canonical bytes, mtime (seconds) and an optional name hint for deltas.

    A large object may come as `load` (a callable returning its canonical bytes) and its `kind`
    instead of `raw`: the writer then reads it only when its turn comes and drops it once no later
    entry can use it as a base, so a pack of any size is written in bounded memory."""

    id: Hash
    raw: bytes
    mtime: int
    hint: str = ""
    kind: str = ""
    load: Callable[[], bytes] | None = None


@dataclass(slots=True)
class PackOptions:
    level: int = 3
    depth: int = 50
    """Longest chain of base entries a delta may sit on."""
    window: int = 3
    """How many earlier entries of the same group are tried as a base."""
    min_delta: int = 64
    """Bodies smaller than this are never delta-compressed (the dictionary serves them better)."""


@dataclass(slots=True)
class PackResult:
    name: str
    pack_path: Path | None
    idx_path: Path | None
    count: int
    checksum: bytes
    size: int = 0
    methods: dict[str, int] = field(default_factory=dict)


DICT_MAX = 8192
"""Bodies up to this size are compressed with the pack's dictionary when it has one."""
