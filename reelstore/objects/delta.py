"""Delta: what a view changed since its base, one operation per name."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal, NamedTuple

from reelstore.errors import BadInput
from reelstore.objects.block import Object, register, v_hash, v_opt, v_str, v_tuple
from reelstore.objects.data import MAX_NAME
from reelstore.objects.hash import Hash


class Put(NamedTuple):
    """Name `name` holds content `id`. A tuple `("put", name, id)`, so it encodes as it always did."""

    op: Literal["put"]
    name: str
    id: Hash


class Remove(NamedTuple):
    """Name `name` is gone. A tuple `("remove", name)` on the wire."""

    op: Literal["remove"]
    name: str


DeltaOp = Put | Remove


def _op(value: Any, where: str) -> DeltaOp:
    name = v_str(MAX_NAME, empty=False)
    if isinstance(value, (tuple, list)) and len(value) == 3 and value[0] == "put":
        return Put("put", name(value[1], where), v_hash(value[2], where))
    if isinstance(value, (tuple, list)) and len(value) == 2 and value[0] == "remove":
        return Remove("remove", name(value[1], where))
    raise BadInput(f"{where} must be [put, name, hash] or [remove, name]")


@register
@dataclass(frozen=True)
class Delta(Object):
    """`ops` are `Put`s and `Remove`s, sorted by name, one per name (plain tuples are accepted and
    converted: the bytes and the id are the same)."""

    kind: ClassVar[str] = "delta"
    base: Hash | None
    ops: tuple[DeltaOp, ...]
    SPEC: ClassVar = {"base": ("base", v_opt(v_hash)), "ops": ("ops", v_tuple(_op))}

    def validate(self) -> None:
        names = [op.name for op in self.ops]
        if any(a >= b for a, b in zip(names, names[1:])):
            raise BadInput("delta ops must be strictly increasing by name")

    def references(self) -> tuple[Hash, ...]:
        refs = [self.base] if self.base is not None else []
        refs.extend(op.id for op in self.ops if isinstance(op, Put))
        return tuple(refs)
