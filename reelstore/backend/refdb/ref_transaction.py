"""Ref transactions: every ref locked in name order and every expected value checked before anything
is written, so a failed check changes nothing (the store's `_lock`/`_read`/`_apply` do the file work)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from reelstore.backend.op_log import RefMove
from reelstore.backend.refdb.ref_format import ANY, AnyValue
from reelstore.crashpoints import crash_point
from reelstore.errors import BadInput, Conflict, NotFound
from reelstore.objects import Hash
from reelstore.objects.ref import check_ref_name

if TYPE_CHECKING:
    from reelstore.backend.refdb.refs import RefStore


@dataclass(frozen=True, slots=True)
class RefUpdate:
    """One ref's change in a transaction."""

    name: str
    new: Hash | None
    """None deletes the ref."""
    old: Hash | None | AnyValue
    """None: the ref must not exist. ANY: no check. Verify-only updates have new == old."""
    verify_only: bool = False
    create_reflog: bool = False
    """Log this update even where `keeps_reflog` would not (git's --create-reflog)."""


@dataclass(frozen=True)
class Owed:
    """An effect a commit leaves owed: a row of a shared store's outbox, written in the same atomic step
    as the trunk move that commits it."""

    op_id: str
    trunk: str
    record: Hash
    position: int
    """The effect's place in the record's buffer (effects of one record are sent in this order)."""
    effect: Hash
    tier: str
    """The effect's delivery tier: keyed, two-phase, queryable or blind."""


class RefTransaction:
    """All-or-nothing: `update`/`create`/`delete`/`verify`, then `commit()` (or `abort()`).

    `prepare()` locks every ref and checks every expected value; `commit()` prepares if needed and
    writes. A failed check raises E002 and releases every lock, having written nothing.
    """

    def __init__(
        self,
        store: RefStore,
        message: str = "",
        principal: str = "",
        create_reflog: bool = False,
        *,
        durable: bool = True,
    ) -> None:
        self.store = store
        self.message = message
        self.principal = principal
        self.create_reflog = create_reflog
        self.durable = durable
        """False: write without fsync, for a ref that only caches what a durable log already holds
        (a drain ref: its journal segment is the durable record)."""
        self.updates: dict[str, RefUpdate] = {}
        self.state = "open"
        self._held: set[str] = set()
        self._before: dict[str, Hash | None] = {}
        """Each ref's value as `prepare` read it under its lock: the old side of the operation log's line."""
        self.owed: list[Owed] = []

    def _add(self, upd: RefUpdate) -> RefTransaction:
        if self.state != "open":
            raise BadInput(f"transaction is {self.state}; no more updates")
        check_ref_name(upd.name)
        if upd.name in self.updates:
            raise BadInput(f"ref {upd.name} appears twice in one transaction")
        if self.create_reflog and not upd.create_reflog:
            upd = RefUpdate(upd.name, upd.new, upd.old, upd.verify_only, create_reflog=True)
        self.updates[upd.name] = upd
        return self

    def update(self, name: str, new: Hash, old: Hash | None | AnyValue = ANY) -> RefTransaction:
        return self._add(RefUpdate(name, new, old))

    def create(self, name: str, new: Hash) -> RefTransaction:
        return self._add(RefUpdate(name, new, None))

    def delete(self, name: str, old: Hash | AnyValue = ANY) -> RefTransaction:
        return self._add(RefUpdate(name, None, old))

    def verify(self, name: str, old: Hash | None) -> RefTransaction:
        return self._add(RefUpdate(name, old, old, verify_only=True))

    def owe(self, rows: list[Owed]) -> RefTransaction:
        """Effects this transaction's commit leaves owed: a store that keeps an outbox writes them in the
        same atomic step as the refs (`RefStore.atomic_outbox`); the others derive them from the record."""
        if self.state != "open":
            raise BadInput(f"transaction is {self.state}; no more updates")
        self.owed.extend(rows)
        return self

    def prepare(self) -> None:
        if self.state == "prepared":
            return
        if self.state != "open":
            raise BadInput(f"transaction is {self.state}")
        names = sorted(self.updates)
        self.store._lock(names)
        self._held = set(names)
        try:
            for name in names:
                upd = self.updates[name]
                current = self._before[name] = self.store._read(name)
                if upd.old is not ANY and current != upd.old:
                    want = upd.old.hex() if isinstance(upd.old, Hash) else "absent"
                    have = "absent" if current is None else current.hex()
                    raise Conflict(f"cannot update ref {name}: it is {have} but expected {want}", ref=name)
                if upd.new is None and not upd.verify_only and current is None:
                    raise NotFound(f"cannot delete ref {name}: it does not exist", ref=name)
        except BaseException:
            self._release()
            self.state = "aborted"
            raise
        self.state = "prepared"

    def _release(self) -> None:
        self.store._unlock(sorted(self._held))
        self._held.clear()

    def commit(self) -> None:
        self.prepare()
        try:
            if self.store.before_apply is not None:
                # Every ref is locked and checked: now make durable what the new values may name.
                self.store.before_apply()
            crash_point("refs:prepared")
            writes = [u for n in sorted(self.updates) if not (u := self.updates[n]).verify_only]
            if self.owed:
                self.store._owe(self.owed)
            # Logged under every lock, so the log's lines of one ref follow the order it moved in.
            moves = [RefMove(u.name, self._before[u.name], u.new) for u in writes]
            self.store._apply_as(writes, self.message, self.principal, self._held, self.durable, moves)
            self.store._settle()
        finally:
            self._release()
            self.state = "committed"

    def abort(self) -> None:
        if self.state == "prepared":
            self._release()
        self.state = "aborted"

    def __enter__(self) -> RefTransaction:
        return self

    def __exit__(self, exc_type: object, *_: object) -> None:
        if exc_type is None and self.state in ("open", "prepared"):
            self.commit()
        elif self.state != "committed":
            self.abort()


Updates = list[RefUpdate]
