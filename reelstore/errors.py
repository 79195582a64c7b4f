"""The one exception hierarchy. Every failure a user can see carries an E-code and an exit status.

Callers classify by class or code, never by message text. The exit statuses are the contract of
DESIGN §8; the command line maps an uncaught ReelError to `error: E0NN: message` and that status.
"""

from __future__ import annotations

from typing import Any


class ReelError(Exception):
    """Base of every reelstore error; `code` and `exit_status` are class attributes."""

    code = "E000"
    exit_status = 1

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = details

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"code": self.code, "message": self.message, "exit": self.exit_status}
        if self.details:
            doc["details"] = {k: _jsonable(v) for k, v in self.details.items()}
        return doc

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


def _jsonable(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if value is None or isinstance(value, (str, int, bool, float)):
        return value
    return str(value)


class NotFound(ReelError):
    """An object, ref, view or operation that does not exist."""

    code, exit_status = "E001", 4


class Conflict(ReelError):
    """A compare-and-swap lost, a base went stale, or a precondition no longer holds."""

    code, exit_status = "E002", 5


class EffectAfterAbort(ReelError):
    """A Class C effect of an aborted view reached the drain. Must be unreachable."""

    code, exit_status = "E003", 1


class ForkDepthExceeded(ReelError):
    code, exit_status = "E005", 6


class DrainTimeout(ReelError):
    code, exit_status = "E006", 1


class StorageError(ReelError):
    """Corruption or an I/O fault: a hash mismatch, an undecodable stored object, a torn file."""

    code, exit_status = "E007", 3


class ViewTerminal(ReelError):
    """The view was already committed or aborted."""

    code, exit_status = "E008", 8


class CapabilityViolation(ReelError):
    """Not authorised: a missing capability, a widening at fork, or a refusing pre-hook."""

    code, exit_status = "E009", 6


class Unreachable(ReelError):
    code, exit_status = "E010", 4


class EffectsIncomplete(ReelError):
    """Base of the two errors a commit or a recovery raises when not every effect succeeded.

    Carries what a caller needs to act: `ops` (the operation ids concerned), `next_action` (what to
    run next) and `result` (the CommitResult or RecoveryReport, when the error comes from one).
    """

    def __init__(self, message: str, *, ops: list[str] | tuple[str, ...] = (), next_action: str = "",
                 result: Any = None, **details: Any) -> None:
        super().__init__(message, ops=list(ops), next_action=next_action, **details)
        self.ops = list(ops)
        self.next_action = next_action
        self.result = result


class OutcomeUnknown(EffectsIncomplete):
    """An effect's outcome cannot be established; an operator must reconcile it."""

    code, exit_status = "E011", 7


class Held(ReelError):
    """The store is on hold: no effect is admitted or drained until release."""

    code, exit_status = "E012", 6


class BudgetExhausted(ReelError):
    """A capability's budget is spent or its expiry has passed."""

    code, exit_status = "E013", 6


class BadInput(ReelError):
    """Malformed input: an undecodable object, a bad ref name, a bad argument."""

    code, exit_status = "E014", 6


class RemoteConflict(ReelError):
    """A compare-and-swap on a remote lost the race."""

    code, exit_status = "E015", 5


class StaleEpoch(ReelError):
    """A fenced writer: its recovery epoch is older than the store's."""

    code, exit_status = "E016", 6



class EffectFailed(EffectsIncomplete):
    """An effect definitely did not happen: the target refused it, or it was provably not sent."""

    code, exit_status = "E017", 9
