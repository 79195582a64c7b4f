"""Recording (`recording`): the reads a dry run passed through, so a replay can answer them again.

A run can be replayed and compared only if it is deterministic, so each source of non-determinism is
recorded before the workflow uses it. A recording is an ordered list of exchanges, each keyed by its request's
fingerprint (method, URL, the headers that select a representation, a digest of the body), with the
response's status, headers (credentials and hop-by-hop headers left out) and body (a blob). It also
keeps the clock at the run's start and a digest of the command's environment, so a replay can say
what differs. A view names its recording; the record that commits the view keeps it reachable.

An exchange that was a model call also has a `model` map: provider, model, the call's fingerprint
(`fp`), the blob of its canonical request document (`request`: what a divergence is diffed against),
whether it streamed, its latency (`latency_ms`, `first_ms`: to the first byte of the answer) and,
where the answer said, `tokens_in` and `tokens_out`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from reelstore.codec import FrozenMap
from reelstore.errors import BadInput
from reelstore.objects.block import Object, register, v_hash, v_int, v_map, v_str, v_tuple
from reelstore.objects.hash import Hash

ENTRY_KEYS = frozenset(("fp", "method", "url", "status", "headers", "body"))
MODEL_KEYS = frozenset(("provider", "model", "fp", "request", "stream", "latency_ms", "first_ms"))
MODEL_OPTIONAL = frozenset(("tokens_in", "tokens_out"))


def v_exchange(value: Any, where: str) -> FrozenMap:
    entry = v_map(value, where)
    if set(entry) - {"model"} != ENTRY_KEYS:
        raise BadInput(f"{where} must have exactly the keys {sorted(ENTRY_KEYS)} (and maybe model)")
    if "model" in entry:
        _model(entry["model"], f"{where}.model")
    v_str(128, empty=False)(entry["fp"], f"{where}.fp")
    v_str(16, empty=False)(entry["method"], f"{where}.method")
    v_str(8192, empty=False)(entry["url"], f"{where}.url")
    v_int(100, 999)(entry["status"], f"{where}.status")
    v_hash(entry["body"], f"{where}.body")
    headers = entry["headers"]
    if not isinstance(headers, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in headers.items()
    ):
        raise BadInput(f"{where}.headers must map names to strings")
    return entry


def _model(value: Any, where: str) -> None:
    model = v_map(value, where)
    if not MODEL_KEYS <= set(model) <= MODEL_KEYS | MODEL_OPTIONAL:
        raise BadInput(f"{where} must have the keys {sorted(MODEL_KEYS)} (and maybe {sorted(MODEL_OPTIONAL)})")
    for key in ("provider", "model", "fp"):
        v_str(256)(model[key], f"{where}.{key}")
    v_hash(model["request"], f"{where}.request")
    if not isinstance(model["stream"], bool):
        raise BadInput(f"{where}.stream must be true or false")
    for key in ("latency_ms", "first_ms", *(MODEL_OPTIONAL & set(model))):
        v_int(0)(model[key], f"{where}.{key}")


@register
@dataclass(frozen=True)
class Recording(Object):
    kind: ClassVar[str] = "recording"
    entries: tuple[FrozenMap, ...]
    started: int
    """The clock (ms since the epoch) when the recorded run began."""
    env: str
    """A digest of the recorded command's environment (names and values, secrets included only hashed)."""
    SPEC: ClassVar = {
        "entries": ("entries", v_tuple(v_exchange, 1 << 16)),
        "env": ("env", v_str(128)),
        "started": ("started", v_int()),
    }

    def references(self) -> tuple[Hash, ...]:
        bodies = [Hash(bytes(e["body"])) for e in self.entries]
        return tuple(bodies + [Hash(bytes(e["model"]["request"])) for e in self.entries if "model" in e])
