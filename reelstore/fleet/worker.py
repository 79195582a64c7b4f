"""A drain worker: claims outbox rows with a lease, journals the intent in the row, sends, settles.

Any number of workers, on any machines, drain one Postgres store. Each row is sent under the claim
that leased it: the intent is written (under the claim's epoch) before the adapter sends, and the
outcome after. A worker that dies leaves its row leased until the lease runs out; the next claim takes
it over by the drain's own tier rules (`resume_by_tier`): a row still `owed` was never sent and is
sent; one left in `intent` is resent with the same key if keyed, asked about if queryable, and parked
`unknown` for an operator if blind (never resent). A worker whose lease ran out and was taken over
cannot write anything more (E016): it stops and says so.

An idle worker sleeps on LISTEN until a commit notifies, or at most one lease time (to take over
expired leases); every loop is bounded.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from reelstore.adapters.base import Adapter, adapter
from reelstore.attribution import now_ms
from reelstore.crashpoints import crash_point
from reelstore.drain import epoch as epochs
from reelstore.drain import hold as holds
from reelstore.drain.drainer import DrainReport, Outcome, fire, resume_by_tier
from reelstore.errors import BadInput, CapabilityViolation, Held, ReelError, StaleEpoch, Unreachable
from reelstore.fleet import database, outbox
from reelstore.hooks.runner import run_pre_hook
from reelstore.objects import Effect, Hash
from reelstore.wording import plural

if TYPE_CHECKING:
    from reelstore.backend.repo import Repo
    from reelstore.fleet.outbox import Conn, Row

DEFAULT_LEASE_S = 30.0
MAX_STEPS = 1 << 40
"""Bound on the rows one run drains (a worker's loops always end; this says where)."""
MAX_ROUNDS = 1 << 40
RECONNECTS = 8
"""Attempts to reach the database again (with growing pauses) before a worker gives up."""


def default_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass
class Drained:
    """One row this worker handled: where it belongs and what became of it."""

    trunk: str
    record: Hash
    outcome: Outcome

    def to_json(self) -> dict[str, Any]:
        return {"trunk": self.trunk, "record": self.record.hex(), **self.outcome.to_json()}


@dataclass
class WorkerReport:
    worker: str
    drained: list[Drained] = field(default_factory=list)
    fenced: str | None = None
    """Why the worker stopped because another claim took its row over (E016), if it did."""
    held: str | None = None
    refused: str | None = None
    """Why the directory's pre-drain hook refused a send (E009), if it did: the worker paused."""
    interrupted: bool = False
    """The worker was stopped (SIGINT, SIGTERM) while waiting or working; a row it held is taken over."""
    progress: Callable[[WorkerReport, Drained], None] | None = field(default=None, repr=False)
    wakeups: int = 0
    """Times a commit's notice woke the idle worker (the rest of its rounds were lease-time polls)."""

    @property
    def sent(self) -> int:
        return sum(d.outcome.action in ("sent", "resent") for d in self.drained)

    @property
    def unknown(self) -> list[str]:
        return [d.outcome.op for d in self.drained if d.outcome.state == "unknown"]

    def line(self, d: Drained) -> str:
        o = d.outcome
        return f"{d.trunk} {d.record.hex()[:12]} effect {o.index} {o.op}: {o.state} ({o.action})" + (
            f" - {o.note}" if o.note else ""
        )

    def summary(self) -> str:
        acts: dict[str, int] = {}
        for d in self.drained:
            acts[d.outcome.action] = acts.get(d.outcome.action, 0) + 1
        detail = ", ".join(f"{n} {a}" for a, n in sorted(acts.items()))
        head = f"worker {self.worker}: {plural(len(self.drained), 'effect')} handled"
        return head + (f" ({detail})" if detail else "")

    def to_json(self) -> dict[str, Any]:
        return {
            "worker": self.worker,
            "drained": [d.to_json() for d in self.drained],
            "sent": self.sent,
            "unknown": self.unknown,
            "fenced": self.fenced,
            "held": self.held,
            "refused": self.refused,
            "interrupted": self.interrupted,
            "wakeups": self.wakeups,
        }


class Worker:
    """One drainer's connection, name, lease and loaded adapters."""

    def __init__(
        self, repo: Repo, url: str, name: str | None = None, lease_s: float = DEFAULT_LEASE_S, conn: Conn | None = None
    ) -> None:
        self.repo, self.url, self.lease_s = repo, url, lease_s
        self.name = name or default_name()
        self.conn: Conn = conn if conn is not None and not conn.closed else outbox.connect(url)
        self.adapters: dict[str, Adapter] = {}

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _retry(self, what: Callable[[], Any]) -> Any:
        """Run `what` on the connection, reconnecting (bounded) if the database went away meanwhile."""
        for attempt in range(RECONNECTS):
            try:
                return what()
            except outbox.OperationalError as exc:
                last = exc
                time.sleep(min(0.1 * 2**attempt, self.lease_s))
                try:
                    self.conn.close()
                    self.conn = outbox.connect(self.url)
                except Unreachable:
                    continue
        raise Unreachable(f"worker {self.name} lost the store's database: {outbox.reason(last)}")

    def step(self, *, trunk: str | None = None, record: Hash | None = None) -> Drained | None:
        """Claim one row and see it through; None when nothing is claimable now. Raises StaleEpoch (E016)
        if another claim took the row over, Held (E012) if the store is on hold (the row is given back)."""
        row: Row | None = self._retry(
            lambda: outbox.claim(self.conn, self.name, self.lease_s, trunk=trunk, record=record)
        )
        if row is None:
            return None
        try:
            holds.check(self.repo)
        except ReelError:
            outbox.release(self.conn, row, 0)
            raise
        return Drained(row.trunk, row.record, self._handle(row))

    def _adapter(self, effect: Effect) -> Adapter:
        impl = self.adapters.get(effect.adapter)
        if impl is None:
            impl = self.adapters[effect.adapter] = adapter(effect.adapter, self.repo)
        return impl

    def _handle(self, row: Row) -> Outcome:
        effect = self.repo.objects.get_as(row.effect, Effect)
        try:
            impl = self._adapter(effect)
        except ReelError as exc:
            return self._unsendable(row, exc)
        if row.state == "owed":
            self._pre_drain(row)
            return self._send(row, effect, impl, "sent" if row.attempts == 0 else "resent")
        verdict, note = resume_by_tier(impl, effect, row.op, now_ms() - row.age_ms, row.note)
        if verdict == "send":
            self._pre_drain(row)
            return self._send(row, effect, impl, "resent")
        if verdict == "succeeded":
            self._settle(row, "succeeded", {"note": note, "reconciled": True, "attempt": row.attempts})
            return Outcome(row.position, row.op, row.effect, "succeeded", "reconciled", note)
        if verdict == "wait":
            left = max(0.0, impl.absence_window(effect) - row.age_ms / 1000)
            self._retry(lambda: outbox.release(self.conn, row, left))
            return Outcome(row.position, row.op, row.effect, "unknown", "halted", note)
        self._settle(row, "unknown", {"note": note, "attempt": row.attempts, "parked": True})
        return Outcome(row.position, row.op, row.effect, "unknown", "halted", note)

    def _pre_drain(self, row: Row) -> None:
        """The directory's `pre-drain` hook, before each send: a refusal (E009) gives the row back,
        untouched, for a lease time, and sends nothing."""
        try:
            run_pre_hook(
                self.repo,
                "pre-drain",
                {"REEL_TRUNK": row.trunk, "REEL_RECORD": row.record.hex(), "REEL_EFFECTS": "1", "REEL_OP": row.op},
            )
        except CapabilityViolation:
            self._retry(lambda: outbox.release(self.conn, row, self.lease_s))
            raise

    def _unsendable(self, row: Row, exc: ReelError) -> Outcome:
        if row.state == "intent":
            note = (
                f"an earlier attempt's outcome is unknown ({row.note}), and its adapter cannot be loaded "
                f"here to resume it: {exc.message}"
            )
            self._settle(row, "unknown", {"note": note, "attempt": row.attempts})
            return Outcome(row.position, row.op, row.effect, "unknown", "halted", note)
        note = (
            f"not sent: its adapter cannot be loaded here ({exc.message}); install or register it, then `reel recover`"
        )
        self._settle(row, "not_sent", {"note": note, "attempt": row.attempts})
        return Outcome(row.position, row.op, row.effect, "not_sent", "tried", note)

    def _send(self, row: Row, effect: Effect, impl: Adapter, action: str) -> Outcome:
        attempt = row.attempts + 1
        note = f"intent: attempt {attempt} under epoch {row.epoch} by worker {self.name}; the request may have left"
        self._retry(lambda: outbox.intent(self.conn, row, self.lease_s, attempt, note))
        crash_point("fleet:before-send")
        result = fire(self.repo, impl, effect, row.op, epochs.current(self.repo))
        crash_point("fleet:after-send")
        state = result.state
        if state == "not_sent":
            action = "tried" if action == "sent" else "retried"
        said = result.note or f"{state} on attempt {attempt}"
        self._settle(
            row,
            state,
            {
                "note": said,
                "attempt": attempt,
                "worker": self.name,
                "action": action,
                "receipt": dict(result.receipt) or None,
            },
        )
        return Outcome(row.position, row.op, row.effect, state, action, said)

    def _settle(self, row: Row, fate: str, doc: dict[str, Any]) -> None:
        self._retry(lambda: outbox.settle(self.conn, row, fate, doc))


def lease_of(repo: Repo, given: float | str | None = None) -> float:
    """The lease a drainer here holds its claims for: `given`, else config `drain.lease`, else 30 s."""
    if given is not None:
        return outbox.parse_lease(given)
    return outbox.parse_lease(repo.config.get("drain.lease", str(DEFAULT_LEASE_S)), "config drain.lease")


def work(
    repo: Repo,
    *,
    once: bool = False,
    lease_s: float | str | None = None,
    name: str | None = None,
    trunk: str | None = None,
    rounds: int = MAX_ROUNDS,
    progress: Callable[[WorkerReport, Drained], None] | None = None,
) -> WorkerReport:
    """`reel drain --worker` and `Store.drain_worker`: drain this store's shared outbox as one worker
    (E014 on a store of its own, whose commits drain themselves; E014 naming --lease if it is out of range)."""
    lease = lease_of(repo, lease_s)
    url = database(repo)
    if url is None:
        raise BadInput(
            "drain workers share a Postgres store's outbox, and this store is its own (its commits drain "
            "themselves; `reel recover` resumes what they left): create the shared store with "
            "`reel init DIR --backend postgresql://...` on every machine",
            field="worker",
        )
    if name is not None and not name.strip():
        raise BadInput("--name needs a worker name", field="name")
    return run(repo, url, name=name, lease_s=lease, once=once, trunk=trunk, rounds=rounds, progress=progress)


def on_commit(repo: Repo) -> str:
    """Who drains a record committed here (config `drain.onCommit`): `self` (the committing process,
    by the lease protocol) or `workers` (the commit leaves its effects owed to the drain workers)."""
    value = repo.config.get("drain.onCommit", "self") or "self"
    if value not in ("self", "workers"):
        raise BadInput(f"config drain.onCommit = {value!r} is neither self nor workers", field="drain.onCommit")
    return value


class _Spare:
    """The connections a store's commits drained with, kept for its next commits (a connection costs
    a few milliseconds to open; a commit's drain would open one each time). Threads take one each."""

    KEEP = 4

    def __init__(self, _repo: Repo) -> None:
        self.free: list[Conn] = []
        self.lock = threading.Lock()

    def take(self) -> Conn | None:
        with self.lock:
            return self.free.pop() if self.free else None

    def give(self, conn: Conn) -> None:
        with self.lock:
            if len(self.free) < self.KEEP and not conn.closed:
                self.free.append(conn)
                return
        conn.close()


def drain_record(repo: Repo, trunk: str, record: Hash) -> DrainReport:
    """`reel commit` on a shared store: drain the record just committed by the same leased claims as
    any worker, so one machine alone behaves as a store of its own (unless `drain.onCommit` leaves it
    to the workers). An effect another worker holds is left to it (`yielded`, still pending here); the
    report says what each effect's row shows."""
    url = database(repo)
    if url is None:
        raise BadInput("this store has no shared outbox")
    report = DrainReport(trunk, record, epochs.current(repo))
    handled: dict[str, Outcome] = {}
    leave = on_commit(repo) == "workers"
    spare = repo.attached(_Spare)
    worker = Worker(repo, url, f"commit:{default_name()}", lease_of(repo), spare.take())
    try:
        for _ in range(0 if leave else MAX_STEPS):
            try:
                done = worker.step(trunk=trunk, record=record)
            except Held as exc:
                report.held = str(exc.details.get("why", exc.message))
                break
            if done is None:
                break
            handled[done.outcome.op] = done.outcome
        rows = worker._retry(lambda: outbox.record_rows(worker.conn, trunk, record))
    finally:
        spare.give(worker.conn)
    for row in rows:
        outcome = handled.get(row.op) or as_found(row)
        report.yielded = report.yielded or outcome.action == "yielded"
        if report.halted is None and outcome.state in ("unknown", "not_sent"):
            report.halted = outcome
        report.outcomes.append(outcome)
    return report


def as_found(row: Row) -> Outcome:
    """An effect this drain did not handle, as its row shows it: settled, held by another worker's live
    lease (yielded: pending here), or waiting behind an earlier one."""
    if row.state in outbox.SETTLED:
        return Outcome(row.position, row.op, row.effect, outbox.state_of(row), "already", row.note)
    if not row.expired:
        return Outcome(
            row.position, row.op, row.effect, "pending", "yielded", f"held by worker {row.worker} under a live lease"
        )
    state = outbox.STATE_OF[row.state]
    return Outcome(row.position, row.op, row.effect, state, "halted" if state != "pending" else "not-reached", row.note)


def run(
    repo: Repo,
    url: str,
    *,
    name: str | None = None,
    lease_s: float = DEFAULT_LEASE_S,
    once: bool = False,
    trunk: str | None = None,
    rounds: int = MAX_ROUNDS,
    progress: Callable[[WorkerReport, Drained], None] | None = None,
) -> WorkerReport:
    """Drain the store as one worker. `once`: what is claimable now, then return. Otherwise listen for
    commits and keep draining for `rounds` rounds (each: drain what is claimable, then sleep until a
    notice or one lease time). Stops early, saying why, if fenced (E016); a hold (E012) pauses it; an
    interrupt (SIGINT) ends it like a crash would, which the protocol makes safe. `progress` is told of
    each row as it is handled."""
    report = WorkerReport(name or default_name(), progress=progress)
    try:
        _run(repo, url, report, lease_s, once, trunk, rounds)
    except KeyboardInterrupt:
        report.interrupted = True
    return report


def _run(
    repo: Repo, url: str, report: WorkerReport, lease_s: float, once: bool, trunk: str | None, rounds: int
) -> None:
    with Worker(repo, url, report.worker, lease_s) as worker:
        worker._retry(lambda: outbox.prepare(worker.conn))
        if once:
            _drain(worker, report, trunk)
            return
        ear: Conn | None = None
        try:
            for _ in range(rounds):
                ear = ear or _listen(worker)
                if not _drain(worker, report, trunk) and report.fenced is not None:
                    break
                try:
                    report.wakeups += outbox.wait(ear, lease_s)
                except outbox.OperationalError:
                    ear.close()
                    ear = None  # the database restarted: listen again next round
        finally:
            if ear is not None:
                ear.close()


def _listen(worker: Worker) -> Conn:
    """A connection listening for commits, reached again (bounded) after the database went away."""
    for attempt in range(RECONNECTS):
        try:
            return outbox.listen(worker.url)
        except (Unreachable, outbox.OperationalError):
            time.sleep(min(0.1 * 2**attempt, worker.lease_s))
    raise Unreachable(f"worker {worker.name} could not listen on the store's database")


def _drain(worker: Worker, report: WorkerReport, trunk: str | None) -> bool:
    """Handle claimable rows until none is left; False if the worker must stop (fenced) or pause (held)."""
    for _ in range(MAX_STEPS):
        try:
            done = worker.step(trunk=trunk)
        except StaleEpoch as exc:
            report.fenced = exc.message
            return False
        except Held as exc:
            report.held = str(exc.details.get("why", exc.message))
            return False
        except CapabilityViolation as exc:
            report.refused = exc.message
            return False
        if done is None:
            return True
        report.drained.append(done)
        if report.progress is not None:
            report.progress(report, done)
    return True
