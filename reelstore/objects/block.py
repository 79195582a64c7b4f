"""Block: the stored unit. Every stored kind derives from `Object` here and registers itself in `KINDS`.

A kind is a `dataclass(frozen=True)` with a `SPEC` mapping body keys to validators. Encoding, decoding
and validation are generic, so every kind goes through the same canonical codec and the same checks.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any, ClassVar, TypeVar

from reelstore.codec import FrozenMap, frame, pack_body, split_frame, thaw, unpack_body
from reelstore.errors import BadInput
from reelstore.objects.hash import Hash

Validator = Callable[[Any, str], Any]
KINDS: dict[str, type[Object]] = {}
T = TypeVar("T", bound="Object")
_Item = TypeVar("_Item")


@dataclass(frozen=True)
class Object:
    """Base of every stored kind (`KINDS`). Immutable; its id is the hash of its canonical bytes."""

    kind: ClassVar[str] = ""
    SPEC: ClassVar[Mapping[str, tuple[str, Validator]]] = {}
    """body key -> (attribute name, validator)."""

    def __post_init__(self) -> None:
        for key, (attr, check) in self.SPEC.items():
            object.__setattr__(self, attr, check(getattr(self, attr), f"{self.kind}.{key}"))
        self.validate()

    def validate(self) -> None:
        """Cross-field rules of a kind; raise BadInput."""

    @classmethod
    def from_canonical(cls: type[T], raw: bytes) -> T:
        """Decode this kind's canonical bytes; a kind may do it faster than the generic path."""
        obj = cls.from_body(unpack_body(split_frame(raw)[1], recheck=False))
        if obj.encode() != raw:
            raise BadInput(f"{cls.kind} is not in canonical form")
        return obj

    def body(self) -> Any:
        """The plain value that is msgpack-encoded as the body."""
        return {key: getattr(self, attr) for key, (attr, _) in self.SPEC.items()}

    @classmethod
    def from_body(cls: type[T], value: Any) -> T:
        if not isinstance(value, Mapping):
            raise BadInput(f"{cls.kind} body must be a map")
        want = set(cls.SPEC)
        if set(value) != want:
            extra, missing = sorted(set(value) - want), sorted(want - set(value))
            raise BadInput(f"{cls.kind} body has unknown keys {extra} or lacks {missing}")
        return cls(**{attr: value[key] for key, (attr, _) in cls.SPEC.items()})

    def encode(self) -> bytes:
        return self._canonical

    @cached_property
    def _canonical(self) -> bytes:
        return frame(self.kind, pack_body(self.body()))

    @cached_property
    def id(self) -> Hash:
        return Hash.of(self._canonical)

    def references(self) -> tuple[Hash, ...]:
        """Ids this object points at: the edges gc, fsck and sync walk."""
        return ()

    def content(self) -> bytes:
        """What `cat-file --batch` prints: raw data for a blob, the msgpack body otherwise."""
        return self._canonical[len(self.kind) + 1 :]

    def to_json(self) -> Any:
        """A JSON-ready view for `cat-file -p` and `--json`."""
        return {key: _json_value(getattr(self, attr)) for key, (attr, _) in self.SPEC.items()}


def _json_value(value: Any) -> Any:
    if isinstance(value, Hash):
        return value.hex()
    if isinstance(value, bytes):
        return {"$bytes": value.hex()}
    if isinstance(value, (FrozenMap, dict)):
        return {k: _json_value(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return [_json_value(v) for v in value]
    return thaw(value)


def register(cls: type[T]) -> type[T]:
    if cls.kind in KINDS:
        raise RuntimeError(f"kind {cls.kind} registered twice")
    KINDS[cls.kind] = cls
    return cls


def kind_class(kind: str) -> type[Object] | None:
    """The class registered for `kind` (None for an unknown kind), its module loaded on first use."""
    cls = KINDS.get(kind)
    if cls is None:
        from reelstore.objects import load_kinds

        load_kinds(kind)
        cls = KINDS.get(kind)
    return cls


def decode(raw: bytes) -> Object:
    """Decode canonical bytes into an object, trusting nothing (E014 on anything malformed)."""
    if raw[:5] == b"blob\x00":
        blob = kind_class("blob")
        assert blob is not None
        return blob.from_canonical(raw)
    kind, body = split_frame(raw)
    cls = kind_class(kind)
    if cls is None:
        raise BadInput(f"unknown object kind {kind!r}")
    obj = cls.from_body(unpack_body(body, recheck=False))
    if obj.encode() != raw:
        raise BadInput(f"{kind} is not in canonical form")
    return obj


_BIN_WIDTH = {0xC4: 1, 0xC5: 2, 0xC6: 4}


def blob_content(raw: bytes, start: int) -> memoryview:
    """The data of a blob whose body (a single msgpack bin) starts at `raw[start]`, without a copy."""
    width = _BIN_WIDTH.get(raw[start] if start < len(raw) else -1)
    if width is None or int.from_bytes(raw[start + 1 : start + 1 + width], "big") != len(raw) - start - 1 - width:
        raise BadInput("blob body is not a single msgpack bin")
    return memoryview(raw)[start + 1 + width :]


def decode_verified(raw: bytes, expected: Hash) -> Object:
    """Decode bytes that were stored under `expected`; the caller maps a mismatch to E007."""
    if Hash.of(raw) != expected:
        raise BadInput("content does not hash to its id")
    obj = decode(raw)
    obj.__dict__["id"] = expected
    return obj


# Validators: each takes (value, where) and returns the normalised value or raises BadInput.


def v_hash(value: Any, where: str) -> Hash:
    if isinstance(value, Hash):
        return value
    if type(value) is bytes and len(value) == 32:
        return Hash(value)
    raise BadInput(f"{where} must be a 32-byte hash")


def v_opt(check: Validator) -> Validator:
    def opt(value: Any, where: str) -> Any:
        return None if value is None else check(value, where)

    return opt


def v_str(max_len: int = 4096, empty: bool = True) -> Validator:
    def check(value: Any, where: str) -> str:
        if not isinstance(value, str):
            raise BadInput(f"{where} must be a string")
        if len(value) > max_len or (not empty and not value):
            raise BadInput(f"{where} must be {'a non-empty' if not empty else 'a'} string of ≤ {max_len} chars")
        return value

    return check


def v_int(lo: int = 0, hi: int = 2**63 - 1) -> Validator:
    def check(value: Any, where: str) -> int:
        if type(value) is not int or not lo <= value <= hi:
            raise BadInput(f"{where} must be an integer in [{lo}, {hi}]")
        return value

    return check


def v_enum(*choices: str) -> Validator:
    def check(value: Any, where: str) -> str:
        if not isinstance(value, str) or value not in choices:
            raise BadInput(f"{where} must be one of {', '.join(choices)}")
        return value

    return check


def v_bytes(value: Any, where: str) -> bytes:
    if not isinstance(value, bytes):
        raise BadInput(f"{where} must be bytes")
    return bytes(value)


def v_map(value: Any, where: str) -> FrozenMap:
    from reelstore.codec import freeze

    if not isinstance(value, Mapping):
        raise BadInput(f"{where} must be a map")
    return value if isinstance(value, FrozenMap) else freeze(value, where)


def v_tuple(check: Callable[[Any, str], _Item], max_len: int = 1 << 20) -> Callable[[Any, str], tuple[_Item, ...]]:
    def each(value: Any, where: str) -> tuple[_Item, ...]:
        if not isinstance(value, (tuple, list)) or len(value) > max_len:
            raise BadInput(f"{where} must be a list of at most {max_len} items")
        return tuple(check(v, f"{where}[{i}]") for i, v in enumerate(value))

    return each
