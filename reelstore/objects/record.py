"""Record: one trunk commit. The trunk is a hash chain of records, like git's commits."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from reelstore.objects.block import Object, register, v_hash, v_int, v_opt, v_str
from reelstore.objects.hash import Hash


@register
@dataclass(frozen=True)
class Record(Object):
    kind: ClassVar[str] = "record"
    parent: Hash | None
    namespace: Hash
    effects: Hash | None = None
    view: Hash | None = None
    author: str = ""
    message: str = ""
    time: int = 0
    """Milliseconds since the Unix epoch."""
    SPEC: ClassVar = {
        "author": ("author", v_str(256)),
        "effects": ("effects", v_opt(v_hash)),
        "message": ("message", v_str(1 << 16)),
        "namespace": ("namespace", v_hash),
        "parent": ("parent", v_opt(v_hash)),
        "time": ("time", v_opt(v_int())),
        "view": ("view", v_opt(v_hash)),
    }

    def references(self) -> tuple[Hash, ...]:
        return tuple(h for h in (self.parent, self.namespace, self.effects, self.view) if h is not None)
