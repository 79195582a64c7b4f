"""Frozen value classes: `@frozen` is `@dataclass(frozen=True)` at a fifth of its class-creation cost.

A one-verb process (`reel fork`, `reel cat-file -p`) defines a dozen value classes before it does any
work, and `dataclass` spends ~0.4 ms on each: six generated methods, each compiled by its own `exec`,
and a regular-expression check per annotation. `frozen` compiles one `__init__` per class and shares
the rest (`__eq__` and `__hash__` read the fields through one `operator.attrgetter`), with the
semantics dataclass gives them; building an instance is also faster (it fills `__dict__` directly).

A class made here is a dataclass to the standard library: it carries `__dataclass_fields__` (built on
first use, so `dataclasses` itself is imported only then), so `dataclasses.fields`, `replace`,
`asdict` and `is_dataclass` work on it, and assigning an attribute raises
`dataclasses.FrozenInstanceError`. What it does not do: `order`, `slots`, `kw_only`, `InitVar`,
per-field `compare`/`repr`/`hash` options. A class that needs one uses `dataclass`.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

if TYPE_CHECKING:
    import dataclasses

    from typing_extensions import dataclass_transform
else:
    def dataclass_transform(**_options: Any) -> Callable[[Any], Any]:
        return lambda decorated: decorated

T = TypeVar("T")
C = TypeVar("C", bound=type)


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


_MISSING = _Missing()
"""No default (dataclasses.MISSING's role, without importing dataclasses)."""


class _Factory:
    __slots__ = ("make",)

    def __init__(self, make: Callable[[], Any]) -> None:
        self.make = make


def field(*, default_factory: Callable[[], T]) -> T:
    """A field whose default is built per instance (as dataclasses.field(default_factory=...))."""
    return _Factory(default_factory)  # type: ignore[return-value]


Spec = dict[str, tuple[Any, Any, Any]]
"""Field name -> (annotation, default or _MISSING, default factory or _MISSING), in field order."""


def _is_classvar(annotation: Any) -> bool:
    if isinstance(annotation, str):  # under `from __future__ import annotations`, as dataclass reads it
        return annotation.startswith(("ClassVar", "typing.ClassVar"))
    return annotation is ClassVar or getattr(annotation, "__origin__", None) is ClassVar


def _setattr(self: Any, name: str, value: Any) -> None:
    from dataclasses import FrozenInstanceError

    raise FrozenInstanceError(f"cannot assign to field {name!r}")


def _delattr(self: Any, name: str) -> None:
    from dataclasses import FrozenInstanceError

    raise FrozenInstanceError(f"cannot delete field {name!r}")


def _eq(self: Any, other: Any) -> Any:
    if other.__class__ is not self.__class__:
        return NotImplemented
    key = self.__frozen_key__
    return key(self) == key(other)


def _hash(self: Any) -> int:
    return hash(self.__frozen_key__(self))


def _no_fields(_obj: Any) -> tuple[()]:
    return ()


def _repr(self: Any) -> str:
    inner = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__frozen_fields__)
    return f"{self.__class__.__qualname__}({inner})"


class _DataclassFields:
    """`__dataclass_fields__`, built (importing dataclasses) the first time the standard library asks:
    `fields`, `replace`, `asdict` and `is_dataclass` read it; a one-verb process usually never does."""

    def __get__(self, obj: Any, owner: type) -> dict[str, dataclasses.Field[Any]]:
        import dataclasses

        specs: list[tuple[str, Any, Any]] = []
        for name, (annotation, default, factory) in owner.__frozen_fields__.items():  # type: ignore[attr-defined]
            if default is not _MISSING:
                specs.append((name, annotation, dataclasses.field(default=default)))
            elif factory is not _MISSING:
                specs.append((name, annotation, dataclasses.field(default_factory=factory)))
            else:
                specs.append((name, annotation, dataclasses.field()))
        # The standard library builds the fields (on a stand-in class of the same fields), so each is the
        # kind of Field that `fields()` and `replace()` look for, whatever that is in this release.
        stand_in = dataclasses.make_dataclass(owner.__name__, specs, frozen=True)
        fields = {f.name: f for f in dataclasses.fields(stand_in)}
        type.__setattr__(owner, "__dataclass_fields__", fields)
        return fields


@dataclass_transform(frozen_default=True, field_specifiers=(field,))
def frozen(cls: C) -> C:
    """Make `cls` a frozen value class of the fields it annotates (after those of its frozen bases)."""
    spec: Spec = {}
    for base in reversed(cls.__mro__[1:]):
        spec.update(getattr(base, "__frozen_fields__", {}))
    namespace: dict[str, Any] = {"_MISSING": _MISSING}
    for name, annotation in cls.__dict__.get("__annotations__", {}).items():
        if _is_classvar(annotation):
            continue
        default: Any = cls.__dict__.get(name, _MISSING)
        factory: Any = _MISSING
        if isinstance(default, _Factory):
            factory, default = default.make, _MISSING
            delattr(cls, name)
        spec[name] = (annotation, default, factory)
    params, body = [], []
    for name, (_, default, factory) in spec.items():
        if default is not _MISSING:
            namespace[f"_d_{name}"] = default
            params.append(f"{name}=_d_{name}")
            body.append(f" d[{name!r}] = {name}")
        elif factory is not _MISSING:
            namespace[f"_f_{name}"] = factory
            params.append(f"{name}=_MISSING")
            body.append(f" d[{name!r}] = _f_{name}() if {name} is _MISSING else {name}")
        else:
            params.append(name)
            body.append(f" d[{name!r}] = {name}")
    if hasattr(cls, "__post_init__"):
        body.append(" self.__post_init__()")
    source = f"def __init__(self, {', '.join(params)}):\n d = self.__dict__\n" + "\n".join(body) + "\n"
    exec(source, namespace)  # noqa: S102  # the source is built above from the class's own field names
    own = dict(cls.__dict__)
    namespace["__init__"].__qualname__ = f"{cls.__qualname__}.__init__"
    key = operator.attrgetter(*spec) if spec else staticmethod(_no_fields)
    methods = {"__init__": namespace["__init__"], "__eq__": _eq, "__hash__": _hash, "__setattr__": _setattr,
               "__delattr__": _delattr, "__frozen_fields__": spec, "__dataclass_fields__": _DataclassFields(),
               "__match_args__": tuple(spec), "__frozen_key__": key}
    if "__repr__" not in own:
        methods["__repr__"] = _repr
    if "__init__" in own:
        del methods["__init__"]
    if "__eq__" in own:
        del methods["__eq__"]
    if "__hash__" in own and not (own["__hash__"] is None and "__eq__" in own):  # a hash of its own
        del methods["__hash__"]
    for name, value in methods.items():
        setattr(cls, name, value)
    return cls
