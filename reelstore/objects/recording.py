"""Recording (`recording`): the reads a dry run passed through, so a replay can answer them again.

KEEL's rule: make the run deterministic by recording each source of non-determinism before the
workflow uses it. A recording is an ordered list of exchanges, each keyed by its request's
fingerprint (method, URL, the headers that select a representation, a digest of the body), with the
response's status, headers (credentials and hop-by-hop headers left out) and body (a blob). It also
keeps the clock at the run's start and a digest of the command's environment, so a replay can say
what differs. A view names its recording; the record that commits the view keeps it reachable.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from reelstore.codec import FrozenMap
from reelstore.errors import BadInput
from reelstore.frozen import frozen
from reelstore.objects.block import Object, register, v_hash, v_int, v_map, v_str, v_tuple
from reelstore.objects.hash import Hash

ENTRY_KEYS = frozenset(("fp", "method", "url", "status", "headers", "body"))


def v_exchange(value: Any, where: str) -> FrozenMap:
    entry = v_map(value, where)
    if set(entry) != ENTRY_KEYS:
        raise BadInput(f"{where} must have exactly the keys {sorted(ENTRY_KEYS)}")
    v_str(128, empty=False)(entry["fp"], f"{where}.fp")
    v_str(16, empty=False)(entry["method"], f"{where}.method")
    v_str(8192, empty=False)(entry["url"], f"{where}.url")
    v_int(100, 999)(entry["status"], f"{where}.status")
    v_hash(entry["body"], f"{where}.body")
    headers = entry["headers"]
    if not isinstance(headers, Mapping) or not all(isinstance(k, str) and isinstance(v, str)
                                                  for k, v in headers.items()):
        raise BadInput(f"{where}.headers must map names to strings")
    return entry


@register
@frozen
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
        return tuple(Hash(bytes(e["body"])) for e in self.entries)
