"""reelstore: views whose side effects fire only on commit. `Store` is the Python API's entry point.

Every public name is importable from here with its real type. The errors are imported at once (they
are small); the API classes and result types load on first use, so `import reelstore.codec` (and the
`reel` command's start-up) does not pay for the whole kernel. Type checkers read the
`TYPE_CHECKING` imports below, so `reelstore.Store.open(...)` is a `Store` to them, not `Any`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from reelstore.errors import (
    ApprovalRequired,
    BadInput,
    BudgetExhausted,
    CapabilityViolation,
    Conflict,
    DrainTimeout,
    EffectAfterAbort,
    EffectFailed,
    EffectsIncomplete,
    ForkDepthExceeded,
    Held,
    LocalWriteError,
    LockHeld,
    NotFound,
    OutcomeUnknown,
    ReelError,
    RemoteConflict,
    RemoteRaceLost,
    StaleEpoch,
    StaleLock,
    StorageError,
    Unreachable,
    ViewTerminal,
)

if TYPE_CHECKING:
    from reelstore.adapters.http_request import HttpRequest
    from reelstore.aio import AsyncStore
    from reelstore.api import Store, ViewHandle
    from reelstore.backend.upkeep import GcReport
    from reelstore.drain.drainer import DrainReport, Outcome
    from reelstore.drain.hold import Hold
    from reelstore.drain.ops import Operation
    from reelstore.drain.recovery import RecoveryReport
    from reelstore.kernel.approval import Standing
    from reelstore.kernel.history import EffectOutcome, LogEntry
    from reelstore.kernel.inspection import NameChange, ViewStatus, ViewSummary
    from reelstore.kernel.verbs import CommitResult
    from reelstore.objects.approval import Approval
    from reelstore.objects.delta import DeltaOp, Put, Remove
    from reelstore.objects.journal import Finding
    from reelstore.sync.fetch import FetchResult
    from reelstore.sync.push import PushResult

__version__ = "0.1.0"

_HOMES = {
    "Approval": "reelstore.objects.approval",
    "AsyncStore": "reelstore.aio",
    "CommitResult": "reelstore.kernel.verbs",
    "DeltaOp": "reelstore.objects.delta",
    "DrainReport": "reelstore.drain.drainer",
    "EffectOutcome": "reelstore.kernel.history",
    "FetchResult": "reelstore.sync.fetch",
    "Finding": "reelstore.objects.journal",
    "GcReport": "reelstore.backend.upkeep",
    "Hold": "reelstore.drain.hold",
    "HttpRequest": "reelstore.adapters.http_request",
    "LogEntry": "reelstore.kernel.history",
    "NameChange": "reelstore.kernel.inspection",
    "Operation": "reelstore.drain.ops",
    "Outcome": "reelstore.drain.drainer",
    "PushResult": "reelstore.sync.push",
    "Put": "reelstore.objects.delta",
    "RecoveryReport": "reelstore.drain.recovery",
    "Remove": "reelstore.objects.delta",
    "Standing": "reelstore.kernel.approval",
    "Store": "reelstore.api",
    "ViewHandle": "reelstore.api",
    "ViewStatus": "reelstore.kernel.inspection",
    "ViewSummary": "reelstore.kernel.inspection",
}

__all__ = [
    "Approval",
    "ApprovalRequired",
    "Standing",
    "AsyncStore",
    "BadInput",
    "BudgetExhausted",
    "CapabilityViolation",
    "CommitResult",
    "Conflict",
    "DeltaOp",
    "DrainReport",
    "DrainTimeout",
    "EffectAfterAbort",
    "EffectFailed",
    "EffectOutcome",
    "EffectsIncomplete",
    "FetchResult",
    "Finding",
    "ForkDepthExceeded",
    "GcReport",
    "Held",
    "Hold",
    "HttpRequest",
    "LocalWriteError",
    "LockHeld",
    "LogEntry",
    "NameChange",
    "NotFound",
    "Operation",
    "Outcome",
    "OutcomeUnknown",
    "PushResult",
    "Put",
    "RecoveryReport",
    "ReelError",
    "Remove",
    "RemoteConflict",
    "RemoteRaceLost",
    "StaleEpoch",
    "StaleLock",
    "StorageError",
    "Store",
    "Unreachable",
    "ViewHandle",
    "ViewStatus",
    "ViewSummary",
    "ViewTerminal",
]


def __getattr__(name: str) -> object:
    """Load a lazily exported name from its home module on first use."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'reelstore' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value
