"""The operator surface on a shared store: `reel ops`, `ops show`, `reconcile` and `recover` read and
write the outbox, so every machine sees and settles every operation, whoever committed or sent it.

On a store of its own each call is the drain's (its journal); on a Postgres store the outbox row is
the journal: its state, its last intent, its outcome. An operation shows as the disk store shows it:
`pending` (owed, nothing sent), `unknown` (an intent with no outcome, or parked), `not_sent`,
`succeeded`, `failed`, `absent` (an operator gave it up). A settlement by an operator raises the row's
epoch, fencing any worker that still holds it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from types import ModuleType
from typing import TYPE_CHECKING, Any

from reelstore.attribution import now_ms
from reelstore.codec import freeze
from reelstore.drain import epoch as epochs
from reelstore.drain import hold as holds
from reelstore.drain import ops as local
from reelstore.drain.drainer import DrainReport, Outcome
from reelstore.drain.ops import Operation, OpSource
from reelstore.drain.recovery import RecoveryReport
from reelstore.errors import Conflict
from reelstore.fleet import database
from reelstore.objects import Effect, Finding, Hash, Journal

if TYPE_CHECKING:
    from reelstore.backend.repo import Repo
    from reelstore.fleet.outbox import Conn, Row


def _entry(
    row: Row,
    state: str,
    time: int,
    note: str,
    receipt: Any = None,
    finding: Hash | None = None,
    epoch: int | None = None,
) -> Journal:
    return Journal(
        prev=None,
        trunk=row.trunk,
        record=row.record,
        index=row.position,
        effect=row.effect,
        op=row.op,
        state=state,
        epoch=row.epoch if epoch is None else epoch,
        time=time,
        receipt=receipt,
        note=note,
        finding=finding,
    )


def _entries(row: Row) -> tuple[Journal, ...]:
    """The row's last intent and its outcome as journal entries (not stored: the row is the journal)."""
    out = []
    said = row.outcome.get("intent_note")
    if isinstance(said, str):
        at, epoch = row.outcome.get("intent_ms"), row.outcome.get("intent_epoch")
        out.append(
            _entry(
                row, "unknown", at if isinstance(at, int) else 0, said, epoch=epoch if isinstance(epoch, int) else None
            )
        )
    state = _outbox().state_of(row)
    if state not in ("pending", "unknown") or row.state == "unknown":
        receipt = row.outcome.get("receipt")
        found = row.outcome.get("finding")
        out.append(
            _entry(
                row,
                state,
                now_ms() - row.age_ms,
                row.note,
                freeze(receipt) if isinstance(receipt, dict) and receipt else None,
                Hash.from_hex(found) if isinstance(found, str) else None,
            )
        )
    return tuple(out)


TAKEOVER = {
    "keyed": "it resends it with the same idempotency key; the target dedups",
    "queryable": "it asks the target's status URL and resends only on a 404 that comes after the attempt can no "
    "longer land (its absence window)",
    "two-phase": "it asks the target about the prepared request and confirms it",
}


@dataclass(frozen=True)
class SharedOperation(Operation):
    """An operation of a shared store: also who last held its row, and whether that lease still runs."""

    worker: str = ""
    leased: bool = False
    """A worker holds the row under a lease that has not run out: it may be sending it now."""

    @property
    def next_action(self) -> str:
        if self.leased:
            return (
                f"none: worker {self.worker} holds it under a lease; should that worker die, any `reel drain "
                "--worker` takes it over once the lease runs out"
            )
        if self.state == "pending":
            return "any `reel drain --worker` sends it (nothing was sent: no intent was journaled)"
        how = TAKEOVER.get(self.effect.delivery)
        if self.state == "unknown" and how is not None:
            return f"any `reel drain --worker` (or `reel recover`) takes it over: {how}"
        return super().next_action

    @property
    def why_unknown(self) -> str:
        if self.state == "unknown" and self.latest is not None and self.latest.note.startswith("blind delivery"):
            return self.latest.note  # parked by a takeover, which said why
        return super().why_unknown

    def to_json(self) -> dict[str, Any]:
        return {**super().to_json(), "worker": self.worker or None, "leased": self.leased}


def _operation(repo: Repo, row: Row, history: bool = False) -> SharedOperation:
    entries = _entries(row)
    latest = entries[-1] if entries else None
    finding = None
    if latest is not None and latest.finding is not None:
        got = repo.objects.get(latest.finding)
        finding = got if isinstance(got, Finding) else None
    return SharedOperation(
        row.op,
        row.trunk,
        row.record,
        row.position,
        repo.objects.get_as(row.effect, Effect),
        _outbox().state_of(row),
        latest,
        finding,
        entries if history else (),
        worker=row.worker,
        leased=row.state in ("owed", "intent") and not row.expired,
    )


def _outbox() -> ModuleType:
    """The outbox module, loaded (with the Postgres client) only for a shared store."""
    from reelstore.fleet import outbox

    return outbox


def _conn(repo: Repo) -> tuple[Conn, str] | None:
    url = database(repo)
    return None if url is None else (_outbox().connect(url), url)


def list_ops(repo: Repo, unresolved: bool = False) -> list[Operation]:
    """Every operation committed records owe or owed (only the unresolved ones, with `unresolved`)."""
    found = _conn(repo)
    if found is None:
        return local.list_ops(repo, unresolved)
    from reelstore.fleet import outbox

    with found[0] as conn:
        out = [_operation(repo, r) for r in outbox.rows(conn, unresolved=unresolved)]
    return [o for o in out if not unresolved or o.state in local.UNRESOLVED]


def record_operations(repo: Repo, trunk: str, record: Hash) -> list[Operation]:
    """The operations of one committed record, in order."""
    found = _conn(repo)
    if found is None:
        return sorted((o for o in local.operations(repo, trunk) if o.record == record), key=lambda o: o.index)
    from reelstore.fleet import outbox

    with found[0] as conn:
        return [_operation(repo, r) for r in outbox.record_rows(conn, trunk, record)]


def find(repo: Repo, name: str) -> Operation:
    """An operation by id or unique prefix, with its history."""
    found = _conn(repo)
    if found is None:
        return local.find(repo, name)
    from reelstore.fleet import outbox

    with found[0] as conn:
        return _operation(repo, outbox.find(conn, name), history=True)


def source(repo: Repo) -> OpSource:
    """Where the operator contract (assign, escalate, ack, close, notify) finds operations."""
    return local.LOCAL if database(repo) is None else OpSource(find, list_ops)


def reconcile(
    repo: Repo, name: str, outcome: str, evidence: str, observer: str, *, source: str = "", scope: str = ""
) -> tuple[Operation, Finding]:
    """Store the operator's finding about an unknown (or not-sent) operation and settle it; nothing is sent.
    The same rules as a store of its own; on a shared store the row is settled under a raised epoch."""
    found = _conn(repo)
    if found is None:
        return local.reconcile(repo, name, outcome, evidence, observer, source=source, scope=scope)
    from reelstore.fleet import outbox

    local.check_finding(outcome, evidence, observer)
    with found[0] as conn:
        row = outbox.find(conn, name)
        op = _operation(repo, row, history=True)
        latest = local.check_reconcilable(op, outcome)
        if row.state == "intent" and not row.expired:
            raise Conflict(
                f"operation {op.op} is being sent by worker {row.worker} under a live lease; reconcile "
                "it once that worker has settled it or its lease has run out",
                op=op.op,
            )
        local.check_absence_provable(repo, op, outcome)
        repo.objects.put(latest)
        finding = Finding(op.op, latest.id, outcome, evidence, observer, now_ms(), source=source, scope=scope)
        repo.objects.put(finding)
        outbox.decide(
            conn,
            row,
            outcome,
            {"note": f"reconciled by {observer}: {evidence}", "finding": finding.id.hex(), "attempt": row.attempts},
        )
        settled = _operation(repo, outbox.find(conn, row.op), history=True)
    return replace(settled, finding=finding), finding


def recover(repo: Repo) -> RecoveryReport:
    """`reel recover` on a shared store: rearm every not-sent row (sent again, any tier) and every unknown
    row of a resumable tier (taken over by tier), then drain what is owed, as one worker; every record
    with an unsettled operation is reported as the disk store reports it (blind unknowns: exit 7)."""
    found = _conn(repo)
    if found is None:
        from reelstore.drain.recovery import recover as resume

        return resume(repo)
    from reelstore.fleet import outbox
    from reelstore.fleet.worker import Worker, as_found, default_name, lease_of

    holds.check(repo)
    conn, url = found
    report = RecoveryReport(epochs.bump(repo))
    handled: dict[str, Outcome] = {}
    with conn:
        outbox.rearm(conn)
    with Worker(repo, url, f"recover:{default_name()}", lease_of(repo)) as worker:
        for _ in range(1 << 40):
            done = worker.step()
            if done is None:
                break
            handled[done.outcome.op] = done.outcome
        rows = worker._retry(lambda: outbox.rows(worker.conn))
    records: dict[tuple[str, Hash], list[Row]] = {}
    for row in rows:
        records.setdefault((row.trunk, row.record), []).append(row)
    for (trunk, record), mine in records.items():
        if not any(r.op in handled or r.state not in outbox.SETTLED for r in mine):
            continue
        drained = DrainReport(trunk, record, report.epoch)
        for row in sorted(mine, key=lambda r: r.position):
            outcome = handled.get(row.op) or as_found(row)
            if drained.halted is None and outcome.state in ("unknown", "not_sent"):
                drained.halted = outcome
            drained.outcomes.append(outcome)
        report.drains.append(drained)
    return report
