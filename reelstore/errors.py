"""The one exception hierarchy. Every failure a user can see carries an E-code and an exit status.

Callers classify by class or code, never by message text; a sub-kind that callers must tell apart
(a taken lock, a lost remote race) is a subclass with its parent's code. The exit statuses are a
contract scripts rely on (docs/errors.md); the command line maps an uncaught ReelError to
`error: E0NN: message` and that status.
"""

from __future__ import annotations

import errno
import os
from typing import Any


class ReelError(Exception):
    """Any other failure. The base of every reelstore error; `code` and `exit_status` are class attributes."""

    code = "E000"
    exit_status = 1
    hint = "read the message: it says what failed"
    """The next action, as the error table (`reel help errors`, docs/errors.md) shows it."""

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
    """An object, ref, view, operation or input file that does not exist."""

    code, exit_status = "E001", 4
    hint = "check the name or path the message gives (`reel views`, `reel show-ref`, `reel ops`)"


class Conflict(ReelError):
    """A compare-and-swap lost, a base went stale, or a precondition no longer holds."""

    code, exit_status = "E002", 5
    hint = "read the current state and try again: commit again, or fork afresh from the trunk"


class LockHeld(Conflict):
    """A ref's lock file is taken: another writer is updating the ref. E002 as any lost swap, but a
    retry loop treats it apart: the holder, not a moved value, is in the way."""

    def __init__(self, message: str, *, ref: str, lock: str, **details: Any) -> None:
        super().__init__(message, ref=ref, lock=lock, **details)
        self.ref = ref
        self.lock = lock
        """The lock file's path."""


class StaleLock(LockHeld):
    """A ref's lock whose holder is dead or unknown and old: it will not go away by itself, so a retry
    loop gives up after one more try and the message names the remedy."""

    def __init__(self, message: str, *, ref: str, lock: str) -> None:
        super().__init__(message, ref=ref, lock=lock, stale=True)


class EffectAfterAbort(ReelError):
    """A Class C effect of an aborted view reached the drain. Must be unreachable."""

    code, exit_status = "E003", 1
    hint = "a bug: an aborted view's effect must never reach the drain; report it with `reel fsck` output"


class ForkDepthExceeded(ReelError):
    """A fork would make a view deeper than 64."""

    code, exit_status = "E005", 6
    hint = "fork from the trunk or a shallower view"


class DrainTimeout(ReelError):
    """A drain did not finish in time."""

    code, exit_status = "E006", 1
    hint = "run `reel recover` to resume the drain"


class StorageError(ReelError):
    """Corruption or an I/O fault in the store's own files: a hash mismatch, an undecodable stored object,
    a torn file. Never used for a file the user named."""

    code, exit_status = "E007", 3
    hint = "the store's own bytes are damaged or unreadable: run `reel fsck`, then restore from a backup or a remote"


class ViewTerminal(ReelError):
    """The view was already committed or aborted, or an operation it carries (a task key, a restored or
    resurrected effect) already belongs to a record or an abort here."""

    code, exit_status = "E008", 8
    hint = (
        "fork a new view; a committed or aborted view takes no more verbs. An operation already owned (the "
        "message names its record or abort) is done or discarded: do not queue it again"
    )


class CapabilityViolation(ReelError):
    """Not authorised: a missing capability, a widening at fork, or a refusing pre-hook."""

    code, exit_status = "E009", 6
    hint = "fork a view with the capability it needs, or fix what the refusing hook says"


class Unreachable(ReelError):
    """A remote or a target that cannot be reached (a precondition could not be checked)."""

    code, exit_status = "E010", 4
    hint = "check that the remote or target answers, then run the command again"


class EffectsIncomplete(ReelError):
    """Base of the two errors a commit or a recovery raises when not every effect succeeded.

    Carries what a caller needs to act: `ops` (the operation ids concerned), `next_action` (what to
    run next) and `result` (the CommitResult or RecoveryReport, when the error comes from one).

    Raised by a commit, it reports a commit that landed: `committed` is its record (hex), which stands
    whatever happened to the effects; `owed` the operation ids still owed (not sent, unknown, or not
    reached): they are settled where they are (`settled_by` says who), so queueing them again in a new
    view would send them twice; `keys` maps an owed operation to the task key it was queued with, for
    effects that have one.
    """

    def __init__(
        self,
        message: str,
        *,
        ops: list[str] | tuple[str, ...] = (),
        next_action: str = "",
        result: Any = None,
        committed: str | None = None,
        owed: list[str] | tuple[str, ...] = (),
        settled_by: str = "",
        keys: dict[str, str] | None = None,
        **details: Any,
    ) -> None:
        if committed is not None:
            details.update(committed=committed, owed=list(owed), settled_by=settled_by, keys=dict(keys or {}))
        super().__init__(message, ops=list(ops), next_action=next_action, **details)
        self.ops = list(ops)
        self.next_action = next_action
        self.result = result
        self.committed = committed
        self.owed = list(owed)
        self.settled_by = settled_by
        self.keys: dict[str, str] = dict(keys or {})


class OutcomeUnknown(EffectsIncomplete):
    """An effect's outcome cannot be established; an operator must reconcile it."""

    code, exit_status = "E011", 7
    hint = (
        "`reel ops --unresolved`, establish what happened, `reel reconcile OP --outcome succeeded` (or "
        "`absent`), then `reel recover`"
    )


class Held(ReelError):
    """The store is on hold: no effect is admitted or drained until release."""

    code, exit_status = "E012", 6
    hint = "`reel release` when the hold's reason is settled, then `reel recover`"


class BudgetExhausted(ReelError):
    """A capability's budget is spent or its expiry has passed."""

    code, exit_status = "E013", 6
    hint = "fork a view whose capability has budget and time left"


class BadInput(ReelError):
    """Malformed or unusable input: an undecodable object, a bad ref name or argument, an input file that
    cannot be read, an adapter that cannot be loaded."""

    code, exit_status = "E014", 6
    hint = "fix the input the message names (a path, an argument, an object)"


class RemoteConflict(ReelError):
    """A compare-and-swap on a remote lost the race."""

    code, exit_status = "E015", 5
    hint = "`reel fetch`, then commit or push again"


class RemoteRaceLost(RemoteConflict):
    """Another store moved the remote first (a ref there moved, or a trunk's earlier remote commit is
    unsettled): after a fetch, another try may win. Other E015s (a view bound elsewhere, aborted or
    committed on the remote) are refusals a retry cannot change."""


class StaleEpoch(ReelError):
    """A fenced writer: its recovery epoch is older than the store's."""

    code, exit_status = "E016", 6
    hint = "a `reel recover` fenced this process: let it finish, then run the command again"


class EffectFailed(EffectsIncomplete):
    """An effect definitely did not happen: the target refused it, or it was provably not sent."""

    code, exit_status = "E017", 9
    hint = "not sent: fix the cause, then `reel recover` sends it again; failed: final, make a new effect in a new view"


class ApprovalRequired(ReelError):
    """A commit would fire effects that an approval rule covers without enough current approvals by
    principals other than the view's initiator, or that someone refused: nothing was committed or sent."""

    code, exit_status = "E018", 10
    hint = (
        "`reel views --awaiting` says who must approve what; an approver runs `reel approve VIEW --by NAME`, "
        "then commit again (a change to the view after that voids the approval)"
    )


class LocalWriteError(ReelError):
    """This machine refused a write: the disk is full (ENOSPC), a quota is spent (EDQUOT) or a file would
    pass the file size limit (EFBIG). Not damage to what is already stored."""

    code, exit_status = "E019", 11
    hint = "free space, or raise the quota or the file size limit, then run the command again"


LOCAL_WRITE_ERRNOS = frozenset(getattr(errno, n) for n in ("ENOSPC", "EDQUOT", "EFBIG") if hasattr(errno, n))
"""The errno values of an OSError that is a `LocalWriteError`."""


def catalogue() -> list[type[ReelError]]:
    """Every error class with a code of its own, in code order."""
    found: dict[str, type[ReelError]] = {}
    todo: list[type[ReelError]] = [ReelError]
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if cls.code not in found or cls is ReelError:
            found.setdefault(cls.code, cls)
    return [found[c] for c in sorted(found)]


def meaning(cls: type[ReelError]) -> str:
    """The first paragraph of the class's docstring, on one line."""
    return " ".join((cls.__doc__ or "").strip().split("\n\n")[0].split())


def table() -> str:
    """The error table as Markdown: code, exit status, class, meaning, next action."""
    rows = ["| code | exit | name | meaning | next action |", "|---|---|---|---|---|"]
    for cls in catalogue():
        cells = (cls.code, str(cls.exit_status), cls.__name__, meaning(cls), cls.hint)
        rows.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(rows)


def input_error(exc: OSError, path: str | os.PathLike[str]) -> ReelError:
    """The error for a file the user named that cannot be read: it is their input, not the store's
    bytes, so E001 (exit 4) if it does not exist and E014 (exit 6) otherwise, never E007."""
    shown = os.fspath(path)
    if isinstance(exc, (FileNotFoundError, NotADirectoryError)):
        return NotFound(f"{shown}: no such file", path=shown)
    if isinstance(exc, IsADirectoryError):
        return BadInput(f"{shown} is a directory, not a file", path=shown)
    if isinstance(exc, PermissionError):
        return BadInput(f"{shown}: permission denied", path=shown)
    return BadInput(f"cannot read {shown}: {exc.strerror or exc}", path=shown)
