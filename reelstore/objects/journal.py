"""The drain's durable history: `journal` entries (one drain outcome each) and `finding`s.

Journal entries chain through `prev`, per trunk, so the drain history is a hash chain that fsck
verifies. A finding is an operator's attributed evidence about an operation whose outcome was unknown.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from reelstore.codec import FrozenMap
from reelstore.objects.block import Object, register, v_enum, v_hash, v_int, v_map, v_opt, v_str
from reelstore.objects.hash import Hash

STATES = ("unknown", "succeeded", "failed", "absent", "not_sent")
OUTCOMES = ("succeeded", "absent")


@register
@dataclass(frozen=True)
class Journal(Object):
    kind: ClassVar[str] = "journal"
    prev: Hash | None
    trunk: str
    record: Hash
    index: int
    effect: Hash
    op: str
    state: str
    epoch: int
    time: int
    receipt: FrozenMap | None = None
    note: str = ""
    finding: Hash | None = None
    """The operator's finding that settled this entry (reconciliation), kept reachable through it."""
    SPEC: ClassVar = {
        "effect": ("effect", v_hash),
        "epoch": ("epoch", v_int()),
        "finding": ("finding", v_opt(v_hash)),
        "index": ("index", v_int()),
        "note": ("note", v_str(1 << 16)),
        "op": ("op", v_str(128, empty=False)),
        "prev": ("prev", v_opt(v_hash)),
        "receipt": ("receipt", v_opt(v_map)),
        "record": ("record", v_hash),
        "state": ("state", v_enum(*STATES)),
        "time": ("time", v_int()),
        "trunk": ("trunk", v_str(1024, empty=False)),
    }

    def references(self) -> tuple[Hash, ...]:
        refs = (self.prev,) if self.prev is not None else ()
        found = (self.finding,) if self.finding is not None else ()
        return refs + (self.record, self.effect) + found


@register
@dataclass(frozen=True)
class Finding(Object):
    kind: ClassVar[str] = "finding"
    op: str
    journal: Hash
    outcome: str
    evidence: str
    observer: str
    time: int
    source: str = ""
    """Where the evidence came from (the target's API, a statement, a support ticket)."""
    scope: str = ""
    """What the finding covers (this operation only, an account and a day, …)."""
    SPEC: ClassVar = {
        "evidence": ("evidence", v_str(1 << 16, empty=False)),
        "journal": ("journal", v_hash),
        "observer": ("observer", v_str(256, empty=False)),
        "op": ("op", v_str(128, empty=False)),
        "outcome": ("outcome", v_enum(*OUTCOMES)),
        "scope": ("scope", v_str(1 << 12)),
        "source": ("source", v_str(1 << 12)),
        "time": ("time", v_int()),
    }

    def references(self) -> tuple[Hash, ...]:
        return (self.journal,)
