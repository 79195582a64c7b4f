"""reelstore: views whose side effects fire only on commit. `Store` is the Python API's entry point."""

from __future__ import annotations

from typing import Any

from reelstore.errors import EffectFailed, OutcomeUnknown, ReelError

__version__ = "0.1.0"

__all__ = ["AsyncStore", "EffectFailed", "HttpRequest", "OutcomeUnknown", "ReelError", "Store", "ViewHandle"]

_HOMES = {"AsyncStore": "reelstore.aio", "HttpRequest": "reelstore.adapters.http_request",
          "Store": "reelstore.api", "ViewHandle": "reelstore.api"}


def __getattr__(name: str) -> Any:
    # Lazy, so `import reelstore.codec` does not load the whole kernel.
    if name in _HOMES:
        import importlib

        return getattr(importlib.import_module(_HOMES[name]), name)
    raise AttributeError(f"module 'reelstore' has no attribute {name!r}")
