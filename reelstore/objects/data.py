"""The namespace's payload kinds: `blob` (raw bytes) and `tree` (a node of the namespace map)."""

from __future__ import annotations

import operator
from dataclasses import dataclass
from functools import cached_property
from typing import Any, ClassVar

import msgpack

from reelstore.codec import MAX_OBJECT_SIZE, MAX_TAG, frame
from reelstore.errors import BadInput
from reelstore.objects.block import Object, register, v_bytes, v_hash, v_int, v_str, v_tuple
from reelstore.objects.hash import HASH_SIZE, Hash, as_hash

MAX_NAME = 4096
_SECOND = operator.itemgetter(1)


@register
@dataclass(frozen=True)
class Blob(Object):
    """Raw bytes. Its body is a single msgpack bin, so a blob's size is its data's length."""

    kind: ClassVar[str] = "blob"
    data: bytes

    def __post_init__(self) -> None:
        object.__setattr__(self, "data", v_bytes(self.data, "blob"))

    def body(self) -> Any:
        return self.data

    @classmethod
    def from_body(cls, value: Any) -> Blob:
        if not isinstance(value, bytes):
            raise BadInput("blob body must be bin")
        return cls(value)

    def content(self) -> bytes:
        return self.data

    @cached_property
    def _canonical(self) -> bytes:
        """The generic encoder's bytes (a msgpack bin header, then the data), built in one copy:
        large content passes through here a piece at a time."""
        return b"".join((b"blob\x00", _bin_head(len(self.data)), self.data))

    @classmethod
    def from_canonical(cls, raw: bytes) -> Blob:
        """Check the header in place and copy the data once (the generic path copies it four times)."""
        if len(raw) > MAX_OBJECT_SIZE + MAX_TAG + 1:
            raise BadInput(f"object of {len(raw)} bytes exceeds the size limit")
        width = {0xC4: 1, 0xC5: 2, 0xC6: 4}.get(raw[5] if len(raw) > 5 else -1)
        if width is None or len(raw) < 6 + width or raw[5 : 6 + width] != _bin_head(len(raw) - 6 - width):
            raise BadInput("blob body is not a single msgpack bin in canonical form")
        blob = cls(raw[6 + width :])
        blob.__dict__["_canonical"] = raw
        return blob

    def to_json(self) -> Any:
        try:
            return {"data": self.data.decode("utf-8")}
        except UnicodeDecodeError:
            return {"data": {"$bytes": self.data.hex()}}


def _bin_head(n: int) -> bytes:
    """msgpack's shortest bin header for `n` bytes."""
    if n < 1 << 8:
        return b"\xc4" + n.to_bytes(1, "big")
    if n < 1 << 16:
        return b"\xc5" + n.to_bytes(2, "big")
    return b"\xc6" + n.to_bytes(4, "big")


def _entry(value: Any, where: str) -> tuple[str, Hash]:
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise BadInput(f"{where} must be a [name, hash] pair")
    return v_str(MAX_NAME, empty=False)(value[0], where), v_hash(value[1], where)


_each_entry = v_tuple(_entry)


def _entries(value: Any, where: str) -> tuple[tuple[str, Hash], ...]:
    """Entries given as (str, 32-byte id) tuples, as the namespace builds them, are checked in bulk;
    anything else goes through the per-entry path, which converts and names the bad entry."""
    if type(value) is tuple and value and len(value) <= 1 << 20:
        if set(map(type, value)) == {tuple} and set(map(len, value)) == {2}:
            names, ids = zip(*value)
            if set(map(type, names)) == {str} and min(map(len, names)) > 0 and max(map(len, names)) <= MAX_NAME:
                kinds = set(map(type, ids))
                if kinds == {Hash}:
                    return value
                if kinds <= {Hash, bytes} and set(map(len, ids)) == {HASH_SIZE}:
                    return tuple(zip(names, map(as_hash, ids)))  # each id just checked 32 bytes long
    return _each_entry(value, where)


@register
@dataclass(frozen=True)
class Tree(Object):
    """One node of a namespace map. Level 0 maps names to value ids; a higher level maps each
    child's first name to the child node. Names are strictly increasing, so a node has one form."""

    kind: ClassVar[str] = "tree"
    level: int
    entries: tuple[tuple[str, Hash], ...]
    SPEC: ClassVar = {"entries": ("entries", _entries), "level": ("level", v_int(0, 64))}

    def validate(self) -> None:
        names = [name for name, _ in self.entries]
        if not all(map(operator.lt, names, names[1:])):
            raise BadInput("tree entries must be strictly increasing by name")
        if self.level > 0 and not self.entries:
            raise BadInput("an inner tree node cannot be empty")

    def references(self) -> tuple[Hash, ...]:
        return tuple(map(_SECOND, self.entries))

    @cached_property
    def _canonical(self) -> bytes:
        """The generic encoder's bytes, packed directly: a validated tree holds only an int and
        (str, Hash) pairs, which msgpack packs exactly as the canonical codec does. Namespace writes
        spend most of their time here, so this skips the generic per-value walk."""
        return frame(self.kind, msgpack.packb({"entries": self.entries, "level": self.level}, use_bin_type=True))
