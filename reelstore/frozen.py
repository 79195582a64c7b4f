"""Frozen value classes: `@frozen` is `@dataclass(frozen=True)` at a fifth of its class-creation cost.

A one-verb process (`reel fork`, `reel cat-file -p`) defines a dozen value classes before it does any
work, and `dataclass` spends ~0.4 ms on each: six generated methods, each compiled by its own `exec`,
and a regular-expression check per annotation. `frozen` compiles one `__init__` per class (the only
method whose speed matters per instance: decoding an object builds one) and shares the rest: `__eq__`,
`__hash__` and `__repr__` read the class's field names, with the semantics dataclass gives them.

A class made here is a dataclass to the standard library: it carries `__dataclass_fields__`, so
`dataclasses.fields`, `replace`, `asdict` and `is_dataclass` work on it, and assigning an attribute
raises `dataclasses.FrozenInstanceError`. What it does not do: `order`, `slots`, `kw_only`, `InitVar`,
per-field `compare`/`repr`/`hash` options. A class that needs one uses `dataclass`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

if TYPE_CHECKING:
    from typing_extensions import dataclass_transform
else:
    def dataclass_transform(**_options: Any) -> Callable[[Any], Any]:
        return lambda decorated: decorated

T = TypeVar("T")
C = TypeVar("C", bound=type)


class _Factory:
    __slots__ = ("make",)

    def __init__(self, make: Callable[[], Any]) -> None:
        self.make = make


def field(*, default_factory: Callable[[], T]) -> T:
    """A field whose default is built per instance (as dataclasses.field(default_factory=...))."""
    return _Factory(default_factory)  # type: ignore[return-value]


def _is_classvar(annotation: Any) -> bool:
    if isinstance(annotation, str):  # under `from __future__ import annotations`, as dataclass reads it
        return annotation.startswith(("ClassVar", "typing.ClassVar"))
    return annotation is ClassVar or getattr(annotation, "__origin__", None) is ClassVar


def _setattr(self: Any, name: str, value: Any) -> None:
    raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")


def _delattr(self: Any, name: str) -> None:
    raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")


def _repr(self: Any) -> str:
    inner = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__dataclass_fields__)
    return f"{self.__class__.__qualname__}({inner})"


@dataclass_transform(frozen_default=True, field_specifiers=(field,))
def frozen(cls: C) -> C:
    """Make `cls` a frozen value class of the fields it annotates (after those of its frozen bases)."""
    fields: dict[str, dataclasses.Field[Any]] = {}
    for base in reversed(cls.__mro__[1:]):
        fields.update(getattr(base, "__dataclass_fields__", {}))
    namespace: dict[str, Any] = {"_MISSING": dataclasses.MISSING}
    for name, annotation in cls.__dict__.get("__annotations__", {}).items():
        if _is_classvar(annotation):
            continue
        default = cls.__dict__.get(name, dataclasses.MISSING)
        factory: Any = dataclasses.MISSING
        if isinstance(default, _Factory):
            factory, default = default.make, dataclasses.MISSING
            delattr(cls, name)
        f = dataclasses.Field(default, factory, True, True, None, True, {}, False)
        f.name, f.type = name, annotation
        f._field_type = dataclasses._FIELD  # type: ignore[attr-defined]  # what fields() and replace() look for
        fields[name] = f
    params, body = [], []
    for name, f in fields.items():
        if f.default is not dataclasses.MISSING:
            namespace[f"_d_{name}"] = f.default
            params.append(f"{name}=_d_{name}")
            body.append(f" d[{name!r}] = {name}")
        elif f.default_factory is not dataclasses.MISSING:
            namespace[f"_f_{name}"] = f.default_factory
            params.append(f"{name}=_MISSING")
            body.append(f" d[{name!r}] = _f_{name}() if {name} is _MISSING else {name}")
        else:
            params.append(name)
            body.append(f" d[{name!r}] = {name}")
    if hasattr(cls, "__post_init__"):
        body.append(" self.__post_init__()")
    key = "(" + "".join(f"self.{name}, " for name in fields) + ")"
    other = "(" + "".join(f"other.{name}, " for name in fields) + ")"
    source = (f"def __init__(self, {', '.join(params)}):\n d = self.__dict__\n" + "\n".join(body) + "\n"
              "def __eq__(self, other):\n if other.__class__ is not self.__class__:\n  return NotImplemented\n"
              f" return {key} == {other}\n"
              f"def __hash__(self):\n return hash({key})\n")
    exec(source, namespace)  # noqa: S102  # the source is built above from the class's own field names
    own = dict(cls.__dict__)
    methods = {"__setattr__": _setattr, "__delattr__": _delattr, "__dataclass_fields__": fields,
               "__match_args__": tuple(fields)}
    if "__repr__" not in own:
        methods["__repr__"] = _repr
    for name in ("__init__", "__eq__", "__hash__"):
        namespace[name].__qualname__ = f"{cls.__qualname__}.{name}"
        methods[name] = namespace[name]
    if "__init__" in own:
        del methods["__init__"]
    if "__eq__" in own:
        del methods["__eq__"]
    if "__hash__" in own and not (own["__hash__"] is None and "__eq__" in own):  # a hash of its own
        del methods["__hash__"]
    for name, value in methods.items():
        setattr(cls, name, value)
    return cls
