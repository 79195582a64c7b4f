"""The object model: the reel protocol's content-addressed kinds and their one codec.

The protocol's six types, one module each: `hash` (Hash, the id), `block` (Object, the stored unit
every kind derives from, and the codec), `ref` (the rules of a ref's name), `delta` (what a view
changed), `capability` (authority a view holds) and `view` (a workspace). The other modules are the
remaining stored kinds: blob and tree (`data`), record, effect(s), journal and finding, chunks,
opevent, recording and approval.

The names below are loaded on first use (PEP 562), so a command that needs only `Hash` (show-ref,
update-ref) does not import the codec and every kind. `KINDS` loads every kind first; `decode` loads
the module of a kind it meets for the first time.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from reelstore.objects.approval import Approval
    from reelstore.objects.block import KINDS, Object, decode, decode_verified
    from reelstore.objects.capability import OPS, Capability, prefix_covers
    from reelstore.objects.chunks import Chunks
    from reelstore.objects.data import Blob, Tree
    from reelstore.objects.delta import Delta, DeltaOp, Put, Remove
    from reelstore.objects.effect import Effect, Effects
    from reelstore.objects.hash import HASH_SIZE, HEX_SIZE, ZERO_HEX, Hash
    from reelstore.objects.journal import Finding, Journal
    from reelstore.objects.opevent import OpEvent
    from reelstore.objects.record import Record
    from reelstore.objects.recording import Recording
    from reelstore.objects.view import View

_HOME = {
    "approval": ("Approval",),
    "block": ("KINDS", "Object", "decode", "decode_verified"),
    "capability": ("OPS", "Capability", "prefix_covers"),
    "chunks": ("Chunks",),
    "data": ("Blob", "Tree"),
    "delta": ("Delta", "DeltaOp", "Put", "Remove"),
    "effect": ("Effect", "Effects"),
    "hash": ("HASH_SIZE", "HEX_SIZE", "ZERO_HEX", "Hash"),
    "journal": ("Finding", "Journal"),
    "opevent": ("OpEvent",),
    "record": ("Record",),
    "recording": ("Recording",),
    "view": ("View",),
}
_WHERE = {name: module for module, names in _HOME.items() for name in names}
KIND_HOMES = {
    "blob": "data",
    "tree": "data",
    "delta": "delta",
    "capability": "capability",
    "effect": "effect",
    "effects": "effect",
    "view": "view",
    "record": "record",
    "journal": "journal",
    "finding": "journal",
    "chunks": "chunks",
    "opevent": "opevent",
    "recording": "recording",
    "approval": "approval",
}
"""Each kind's module, so decoding one kind loads only the module that registers it."""

__all__ = [
    "Approval",
    "HASH_SIZE",
    "HEX_SIZE",
    "KINDS",
    "KIND_HOMES",
    "OPS",
    "ZERO_HEX",
    "Blob",
    "Capability",
    "Chunks",
    "Delta",
    "DeltaOp",
    "Effect",
    "Effects",
    "Finding",
    "Hash",
    "Journal",
    "Object",
    "OpEvent",
    "Put",
    "Record",
    "Recording",
    "Remove",
    "Tree",
    "View",
    "decode",
    "decode_verified",
    "load_kinds",
    "prefix_covers",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if name == "KINDS":
        load_kinds()
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def load_kinds(kind: str | None = None) -> None:
    """Import the module of `kind` (of every kind, for None), so it has registered itself in KINDS."""
    home = KIND_HOMES.get(kind) if kind is not None else None
    for module in [home] if home is not None else _HOME:
        importlib.import_module(f"{__name__}.{module}")
