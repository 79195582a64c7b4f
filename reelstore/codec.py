"""The one codec: canonical msgpack with a kind tag, and the bounded decoder.

Canonical bytes of an object are `KIND 0x00 BODY`, where BODY is msgpack of plain values with map keys
sorted, `bytes` as bin and `str` as UTF-8 str, integers in their shortest form and floats always as
IEEE-754 doubles (msgpack float 64; NaN and the infinities refused: JSON has no text for them). The
decoder re-encodes what it read and refuses anything that does not come back byte for byte (a float 32
included), so every value has exactly one encoding and an id can never name two different byte strings.
An integer and a float are different values (`1` and `1.0` encode differently), as they are in JSON.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import msgpack

from reelstore.errors import BadInput

MAX_OBJECT_SIZE = 64 * 1024 * 1024
"""Largest canonical object accepted anywhere: in a store, a pack, a remote."""

MAX_DEPTH = 32
"""Deepest nesting of containers a body may have."""

MAX_TAG = 16

_INT_MIN = -(2**63)
_INT_MAX = 2**64 - 1


class FrozenMap(Mapping[str, Any]):
    """An immutable, hashable string-keyed map: what the decoder yields for a msgpack map."""

    __slots__ = ("_d", "_h")

    def __init__(self, items: Mapping[str, Any] | Iterable[tuple[str, Any]] | None = None) -> None:
        self._d: dict[str, Any] = dict(items or ())
        self._h: int | None = None

    def __getitem__(self, key: str) -> Any:
        return self._d[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._d)

    def __len__(self) -> int:
        return len(self._d)

    def __hash__(self) -> int:
        if self._h is None:
            self._h = hash(tuple(sorted(self._d.items(), key=lambda kv: kv[0])))
        return self._h

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Mapping):
            return dict(self._d) == dict(other)
        return NotImplemented

    def __repr__(self) -> str:
        return f"FrozenMap({self._d!r})"


def _finite(value: float, where: str) -> float:
    """`value` as a plain IEEE double; E014 naming `where` for NaN and the infinities."""
    if not math.isfinite(value):
        raise BadInput(
            f"{where or 'value'}: {value!r} is not a finite number; JSON and this store accept only "
            "finite numbers (send it as a string if you mean it)",
            field=where or "value",
        )
    return float(value)


def freeze(value: Any, where: str = "", _depth: int = 0) -> Any:
    """Turn JSON-like input into the immutable, canonical-ready form objects hold.

    Rejects what the codec cannot represent exactly (NaN and infinities, non-string keys, huge ints)
    with E014 naming the field by its path from `where` (e.g. `op.json.amount`).
    """
    at = where or "value"
    if _depth > MAX_DEPTH:
        raise BadInput(f"{at}: value nests deeper than {MAX_DEPTH} levels", field=at)
    if value is None or isinstance(value, (bool, str, bytes)):
        return value
    if isinstance(value, int):
        if not _INT_MIN <= value <= _INT_MAX:
            raise BadInput(f"{at}: integer {value} is out of the 64-bit range", field=at)
        return value
    if isinstance(value, float):
        return _finite(value, at)
    if isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise BadInput(f"{at}: map keys must be strings, not {type(k).__name__}", field=at)
            out[k] = freeze(v, f"{where}.{k}" if where else k, _depth + 1)
        return FrozenMap(out)
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v, f"{at}[{i}]", _depth + 1) for i, v in enumerate(value))
    raise BadInput(f"{at}: cannot encode a value of type {type(value).__name__}", field=at)


def thaw(value: Any) -> Any:
    """Plain dicts and lists again, for JSON output and for callers that want to mutate."""
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [thaw(v) for v in value]
    return value


def _plain(value: Any, depth: int) -> Any:
    """Prepare a value for msgpack: sorted maps, bytes subclasses as bytes, finite floats as doubles."""
    if depth > MAX_DEPTH:
        raise BadInput(f"value nests deeper than {MAX_DEPTH} levels")
    t = type(value)
    if value is None or t is bool or t is str or t is bytes:
        return value
    if t is int:
        if not _INT_MIN <= value <= _INT_MAX:
            raise BadInput(f"integer {value} is out of the 64-bit range")
        return value
    if isinstance(value, bytes):
        return bytes(value)
    if isinstance(value, Mapping):
        keys = list(value.keys())
        for k in keys:
            if type(k) is not str:
                raise BadInput("map keys must be strings")
        return {k: _plain(value[k], depth + 1) for k in sorted(keys)}
    if isinstance(value, (tuple, list)):
        return [_plain(v, depth + 1) for v in value]
    if isinstance(value, float):
        return _finite(value, "")
    if isinstance(value, int):
        return int(value)
    raise BadInput(f"cannot encode a value of type {t.__name__}")


def pack_body(value: Any) -> bytes:
    """Canonical msgpack bytes of a plain value (E014 for a string that is not valid Unicode text)."""
    try:
        packed: bytes = msgpack.packb(_plain(value, 0), use_bin_type=True)
    except UnicodeEncodeError as exc:
        raise BadInput(f"string is not valid UTF-8 text: {exc.reason}") from None
    return packed


def _pairs(pairs: list[tuple[Any, Any]]) -> FrozenMap:
    m = FrozenMap(pairs)
    if len(m) != len(pairs):
        raise ValueError("duplicate map key")
    return m


def unpack_body(body: bytes, *, recheck: bool = True) -> Any:
    """Decode a body strictly: bounded, no trailing bytes, and byte-identical on re-encode.

    `recheck=False` skips the re-encode for a caller that re-encodes the whole object itself anyway.
    """
    if len(body) > MAX_OBJECT_SIZE:
        raise BadInput(f"object body of {len(body)} bytes exceeds the {MAX_OBJECT_SIZE}-byte limit")
    try:
        value = msgpack.unpackb(
            body,
            raw=False,
            use_list=False,
            strict_map_key=True,
            object_pairs_hook=_pairs,
            ext_hook=_no_ext,
        )
    except BadInput:
        raise
    except Exception as exc:  # msgpack raises several unrelated types for malformed input
        raise BadInput(f"malformed object body: {exc.__class__.__name__}: {exc}") from None
    if not recheck:
        return value
    try:
        again = pack_body(value)
    except BadInput as exc:
        raise BadInput(f"malformed object body: {exc.message}") from None
    if again != body:
        raise BadInput("object body is not in canonical form")
    return value


def _no_ext(code: int, data: bytes) -> Any:
    raise BadInput(f"msgpack extension type {code} is not allowed")


def frame(kind: str, body: bytes) -> bytes:
    """Canonical bytes: the kind tag, a NUL, the body."""
    return kind.encode("ascii") + b"\x00" + body


def split_frame(raw: bytes) -> tuple[str, bytes]:
    """Split canonical bytes into (kind, body) without trusting them."""
    if len(raw) > MAX_OBJECT_SIZE + MAX_TAG + 1:
        raise BadInput(f"object of {len(raw)} bytes exceeds the size limit")
    nul = raw.find(b"\x00", 0, MAX_TAG + 1)
    if nul <= 0:
        raise BadInput("object has no kind tag")
    tag = raw[:nul]
    if not tag.isascii() or not tag.isalpha() or not tag.islower():
        raise BadInput("object kind tag is malformed")
    return tag.decode("ascii"), raw[nul + 1 :]
