"""Two small real adapters for the kernel's tests: a recording Class C target and a versioned Class B one.

Both are genuine adapters (registered in the registry, handed fire tokens by the real drain); their
"remote side" is a plain in-process object the test inspects, the oracle the kernel never reads.
"""

from __future__ import annotations

import traceback
from collections.abc import Mapping
from typing import Any

import reelstore.adapters.fs  # noqa: F401  (register the shipped adapters before adding ours)
import reelstore.adapters.http  # noqa: F401
from reelstore.adapters.base import Adapter, Admission, Result, register
from reelstore.errors import BadInput, Conflict
from reelstore.objects import Effect

FIRED: list[tuple[str, Any]] = []
"""(effect id hex, op["n"]) for every effect the recorder delivered, in order."""
STACKS: list[list[str]] = []
"""The function names on the stack at each delivery."""
VERSIONS: dict[str, str] = {}
"""The versioned target's current version of each key."""


@register
class Recorder(Adapter):
    name = "recorder"

    def classify(self, op: Mapping[str, Any]) -> Admission:
        if "n" not in op:
            raise BadInput("recorder op needs 'n'")
        return Admission(f"rec:{op.get('topic', 'all')}/{op['n']}", "C", "keyed")

    def fire(self, effect: Effect, token: Any, op_id: str) -> Result:
        token.consume(effect.id)
        FIRED.append((effect.id.hex(), effect.op["n"]))
        if effect.op.get("trace"):
            STACKS.append([frame.name for frame in traceback.extract_stack()])
        return Result("succeeded", {"n": effect.op["n"]})


@register
class Versioned(Adapter):
    name = "versioned"

    def classify(self, op: Mapping[str, Any]) -> Admission:
        key = op.get("key")
        if not isinstance(key, str):
            raise BadInput("versioned op needs 'key'")
        return Admission(f"ver:{key}", "B", "keyed", {"kind": "etag", "value": VERSIONS.get(key, "0")})

    def check_precondition(self, effect: Effect) -> None:
        key = effect.op["key"]
        want = (effect.version_ref or {}).get("value")
        if VERSIONS.get(key, "0") != want:
            raise Conflict(f"{key} is at version {VERSIONS.get(key, '0')}, the effect expected {want}")

    def fire(self, effect: Effect, token: Any, op_id: str) -> Result:
        token.consume(effect.id)
        key = effect.op["key"]
        VERSIONS[key] = str(int(VERSIONS.get(key, "0")) + 1)
        FIRED.append((effect.id.hex(), key))
        return Result("succeeded", {"version": VERSIONS[key]})


def reset() -> None:
    FIRED.clear()
    STACKS.clear()
    VERSIONS.clear()
