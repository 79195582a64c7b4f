"""Delta (reel type 4 of 6): what a view changed since its base, one operation per name."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from reelstore.errors import BadInput
from reelstore.objects.block import Object, register, v_hash, v_opt, v_str, v_tuple
from reelstore.objects.data import MAX_NAME
from reelstore.objects.hash import Hash


def _op(value: Any, where: str) -> tuple[Any, ...]:
    name = v_str(MAX_NAME, empty=False)
    if isinstance(value, (tuple, list)) and len(value) == 3 and value[0] == "put":
        return ("put", name(value[1], where), v_hash(value[2], where))
    if isinstance(value, (tuple, list)) and len(value) == 2 and value[0] == "remove":
        return ("remove", name(value[1], where))
    raise BadInput(f"{where} must be [put, name, hash] or [remove, name]")


@register
@dataclass(frozen=True)
class Delta(Object):
    """`ops` are `("put", name, hash)` or `("remove", name)`, sorted by name, one per name."""

    kind: ClassVar[str] = "delta"
    base: Hash | None
    ops: tuple[tuple[Any, ...], ...]
    SPEC: ClassVar = {"base": ("base", v_opt(v_hash)), "ops": ("ops", v_tuple(_op))}

    def validate(self) -> None:
        names = [op[1] for op in self.ops]
        if any(a >= b for a, b in zip(names, names[1:])):
            raise BadInput("delta ops must be strictly increasing by name")

    def references(self) -> tuple[Hash, ...]:
        refs = [self.base] if self.base is not None else []
        refs.extend(op[2] for op in self.ops if op[0] == "put")
        return tuple(refs)
