"""Effects: one pending Class B or C side effect (`effect`) and an ordered sequence (`effects`).

An effect records everything its drain needs (adapter, resource, operation, delivery tier), fixed
at admission: a later config change cannot change how an already-admitted effect is delivered.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from reelstore.codec import FrozenMap
from reelstore.objects.block import Object, register, v_enum, v_hash, v_map, v_opt, v_str, v_tuple
from reelstore.objects.hash import Hash

CLASSES = ("B", "C")
DELIVERIES = ("keyed", "two-phase", "queryable", "blind")


@register
@dataclass(frozen=True)
class Effect(Object):
    kind: ClassVar[str] = "effect"
    adapter: str
    effect_class: str
    resource: str
    op: FrozenMap
    delivery: str = "blind"
    version_ref: FrozenMap | None = None
    principal: str = ""
    meta: FrozenMap = field(default_factory=FrozenMap)
    SPEC: ClassVar = {
        "adapter": ("adapter", v_str(64, empty=False)),
        "class": ("effect_class", v_enum(*CLASSES)),
        "delivery": ("delivery", v_enum(*DELIVERIES)),
        "meta": ("meta", v_map),
        "op": ("op", v_map),
        "principal": ("principal", v_str(256)),
        "resource": ("resource", v_str(8192, empty=False)),
        "version_ref": ("version_ref", v_opt(v_map)),
    }


@register
@dataclass(frozen=True)
class Effects(Object):
    """An ordered sequence of effect ids: a view's pending buffer, or a record's drained list."""

    kind: ClassVar[str] = "effects"
    items: tuple[Hash, ...]
    SPEC: ClassVar = {"items": ("items", v_tuple(v_hash, 1 << 16))}

    def references(self) -> tuple[Hash, ...]:
        return self.items
