"""Hash: the 32-byte BLAKE3 id of an object's canonical bytes."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import blake3

from reelstore.errors import BadInput

HASH_SIZE = 32
HEX_SIZE = 2 * HASH_SIZE
MIN_PREFIX = 4
_HEX = frozenset("0123456789abcdef")


class Hash(bytes):
    """An object id. A bytes subclass, so it packs as msgpack bin and compares as bytes."""

    __slots__ = ()

    def __new__(cls, value: bytes) -> Hash:
        if len(value) != HASH_SIZE:
            raise BadInput(f"a hash is {HASH_SIZE} bytes, not {len(value)}")
        return super().__new__(cls, value)

    @classmethod
    def of(cls, canonical: bytes) -> Hash:
        """The id of canonical bytes."""
        return cls(blake3.blake3(canonical).digest())

    @classmethod
    def from_hex(cls, text: str) -> Hash:
        if not is_full_hex(text):
            raise BadInput(f"not a {HEX_SIZE}-digit lowercase hex id: {text!r}")
        return cls(bytes.fromhex(text))

    def __str__(self) -> str:
        return self.hex()

    def __repr__(self) -> str:
        return f"Hash({self.hex()[:12]}…)"

    @property
    def short(self) -> str:
        return self.hex()[:12]


ZERO_HEX = "0" * HEX_SIZE


as_hash: Callable[[bytes], Hash] = partial(bytes.__new__, Hash)
"""Hash from bytes already checked to be 32 long, without the length check: what a reader turns stored
ids into (nodes read back keep theirs as plain bytes, equal to and hashing like Hash)."""


def is_hex(text: str) -> bool:
    return bool(text) and set(text) <= _HEX


def is_full_hex(text: str) -> bool:
    return len(text) == HEX_SIZE and is_hex(text)


def is_prefix(text: str) -> bool:
    """True for text that may name an object by a unique prefix (4 to 64 lowercase hex digits)."""
    return MIN_PREFIX <= len(text) <= HEX_SIZE and is_hex(text)
