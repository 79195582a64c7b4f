"""`undo`: put back the refs the store's newest operation moved, by compare-and-swap.

Only what stays local can be undone: a fork, a write (put, rm, effect), a commit whose record carries
no effects and went to no remote, an abort of a view no remote holds, a snapshot, a restore, an
`update-ref`, or an undo (so a second undo redoes). An effect that was committed belongs to the drain
and may have reached the world, so such a commit is refused whether or not it was sent yet; so is an
operation of sync, the drain or the operator. Every ref goes back only if it still holds what the
operation left (E002 naming the ref otherwise), all in one ref transaction, so an undo that is
refused changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from reelstore.backend.op_log import Operation, RefMove, operation
from reelstore.backend.repo import Repo
from reelstore.drain import journal as drainlog
from reelstore.drain.drainer import record_effects, record_ops
from reelstore.errors import BadInput, Conflict, NotFound
from reelstore.kernel import binding
from reelstore.objects import Hash, Object, Record, View
from reelstore.objects.ref import HEAD_PREFIX, VIEW_PREFIX
from reelstore.wording import plural

UNDOABLE = frozenset(
    {"fork", "put", "rm", "effect", "transaction", "commit", "abort", "snapshot", "restore", "update-ref", "undo"}
)
"""The verbs whose ref moves are the store's own and can be put back."""


@dataclass(frozen=True)
class UndoResult:
    """The operation undone and the refs put back (`old` is what each held, `new` what it holds now)."""

    op: Operation
    moves: tuple[RefMove, ...]

    def to_json(self) -> dict[str, object]:
        return {
            "undone": {"op": self.op.id, "verb": self.op.verb, "message": self.op.message},
            "refs": [{"ref": m.ref, "old": _hex(m.old), "new": _hex(m.new)} for m in self.moves],
        }


@operation("undo")
def undo(repo: Repo) -> UndoResult:
    """Undo the newest operation in the store's operation log: E001 if there is none, E014 if its kind
    cannot be undone (the message says why), E002 if a ref it moved has moved since."""
    ops = repo.ops.operations()
    if not ops:
        raise NotFound("the operation log is empty: nothing to undo")
    op = ops[-1]
    moves = op.net()
    _check_undoable(repo, op, moves)
    back = tuple(RefMove(m.ref, m.new, m.old) for m in moves)
    tx = repo.refs.transaction(f"undo {op.id} ({op.message})", repo.principal())
    for m in back:
        if m.new is None:
            assert m.old is not None  # a net move changes its ref, so one side is a value
            tx.delete(m.ref, m.old)
        else:
            tx.update(m.ref, m.new, m.old)
    try:
        tx.commit()
    except (Conflict, NotFound) as exc:
        raise Conflict(
            f"cannot undo operation {op.id} ({op.message}): {exc.message}; nothing was changed", op=op.id
        ) from None
    return UndoResult(op, back)


def _check_undoable(repo: Repo, op: Operation, moves: list[RefMove]) -> None:
    what = f"operation {op.id} ({op.message})"
    if op.verb not in UNDOABLE:
        raise BadInput(
            f"cannot undo {what}: a {op.verb} is not the store's own change to take back "
            "(only fork, put, rm, effect, commit, abort, snapshot, restore, update-ref and undo are)",
            op=op.id,
        )
    if not moves:
        raise BadInput(f"cannot undo {what}: it left every ref as it found it", op=op.id)
    for m in moves:
        if m.old is not None:
            _check_present(repo, what, m.ref, m.old)
        if m.ref.startswith(HEAD_PREFIX) and m.new is not None and m.old != m.new:
            _check_local_commit(repo, what, m.ref[len(HEAD_PREFIX) :], m.old, m.new)
        if m.ref.startswith(VIEW_PREFIX) and m.old is not None and m.new is None:
            view = repo.cache.load(m.old, View)
            remote = binding.bound_remote(repo, view)
            if remote is not None:
                raise BadInput(
                    f"cannot undo {what}: view {m.ref[len(VIEW_PREFIX) :]!r} is bound to remote "
                    f"{remote!r}, where it may have been committed or aborted since",
                    op=op.id,
                )


def _check_present(repo: Repo, what: str, ref: str, value: Hash) -> None:
    """The object a ref would point at again, and what it names directly, must still be stored (gc
    collects an aborted view's objects)."""
    missing = (
        [h for h in (value, *repo.cache.load(value, Object).references()) if not repo.objects.has(h)]
        if repo.objects.has(value)
        else [value]
    )
    if missing:
        raise NotFound(
            f"cannot undo {what}: {ref} would point at {value.hex()}, but object {missing[0].hex()} "
            "was collected by gc",
            ref=ref,
        )


def _check_local_commit(repo: Repo, what: str, trunk: str, old: Hash | None, new: Hash) -> None:
    """Refuse to move a trunk between `old` and `new` across a record whose effects the drain owns, or
    one a remote may hold: only records without effects, on a trunk that tracks no remote, go."""
    between = _path(repo, new, old)
    if between is None and old is not None:
        between = _path(repo, old, new)
    if between is None:
        raise BadInput(
            f"cannot undo {what}: trunk {trunk!r} went from {_hex(old)} to {new.hex()}, "
            "neither of which descends from the other"
        )
    for record in between:
        effects = record_effects(repo, record)
        if effects:
            sent = drainlog.index(repo, trunk).latest.keys() & set(record_ops(repo, trunk, record, effects))
            was = "was" if len(sent) == 1 else "were"
            state = (
                f"{len(sent)} of its {plural(len(effects), 'effect')} {was} already drained; an effect that was "
                "sent cannot be unsent"
                if sent
                else f"its {plural(len(effects), 'effect')} committed and owed by the drain (`reel recover` sends)"
            )
            raise BadInput(
                f"cannot undo {what}: record {record.hex()} on trunk {trunk!r} carries effects: {state}",
                record=record.hex(),
            )
    remote = binding.tracked_remote(repo, trunk)
    if remote is not None:
        raise BadInput(
            f"cannot undo {what}: trunk {trunk!r} tracks remote {remote!r}, which may hold its records already",
            remote=remote,
        )


def _path(repo: Repo, start: Hash | None, stop: Hash | None, limit: int = 10_000) -> list[Hash] | None:
    """The records from `start` down to `stop` (excluded) along first parents, or None if `stop` is not
    an ancestor of `start` within `limit` records."""
    out: list[Hash] = []
    head = start
    while head != stop:
        if head is None or len(out) >= limit:
            return None
        out.append(head)
        head = repo.cache.load(head, Record).parent
    return out


def _hex(h: Hash | None) -> str | None:
    return None if h is None else h.hex()
