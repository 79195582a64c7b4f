"""reelstore: views whose side effects fire only on commit. `Store` is the Python API's entry point."""

from __future__ import annotations

from typing import Any

from reelstore.errors import EffectFailed, OutcomeUnknown, ReelError

__all__ = ["EffectFailed", "OutcomeUnknown", "ReelError", "Store"]


def __getattr__(name: str) -> Any:
    # Lazy, so `import reelstore.codec` does not load the whole kernel.
    if name == "Store":
        from reelstore.api import Store

        return Store
    raise AttributeError(f"module 'reelstore' has no attribute {name!r}")
