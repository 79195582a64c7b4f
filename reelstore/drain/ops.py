"""The operator surface: every operation a committed record owes, its state, evidence and next step.

An operation is one effect of one record (its id from `record_ops`). Its state is its newest journal
entry's (`pending` if it has none yet). For an unknown operation this module says why the outcome is
unknown and what the operator can do; `reconcile` records the operator's attributed evidence as a
`finding` and settles the operation with a journal entry that cites it. Nothing here sends anything.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from reelstore.codec import thaw
from reelstore.drain import epoch as epochs
from reelstore.drain import journal as drainlog
from reelstore.drain.drainer import COMMIT_MESSAGE, blind_reason, record_effects, record_ops
from reelstore.errors import BadInput, Conflict, NotFound, StorageError
from reelstore.objects import Effect, Finding, Hash, Journal, Record

if TYPE_CHECKING:
    from reelstore.backend.repo import Repo

UNRESOLVED = ("pending", "not_sent", "unknown")
MAX_RECORDS = 1 << 32


@dataclass(frozen=True)
class Operation:
    """One effect of one committed record, as `reel ops` lists it: its state from its newest journal
    entry (`latest`), the operator's finding that settled it, if any, and (from `find`) its history."""

    op: str
    trunk: str
    record: Hash
    index: int
    effect: Effect
    state: str
    latest: Journal | None
    finding: Finding | None = None
    history: tuple[Journal, ...] = ()

    @property
    def evidence(self) -> str:
        if self.finding is not None:
            f = self.finding
            where = ", ".join(
                x for x in (f"source: {f.source}" if f.source else "", f"scope: {f.scope}" if f.scope else "") if x
            )
            return f"{f.observer}: {f.evidence}" + (f" ({where})" if where else "")
        if self.latest is None:
            return "no journal entry yet: the record was committed but its drain never reached this effect"
        receipt = self.latest.receipt
        status = receipt.get("status") if receipt is not None else None
        return self.latest.note + (f" (HTTP {status})" if status is not None and "HTTP" not in self.latest.note else "")

    @property
    def evidence_time(self) -> int | None:
        if self.finding is not None:
            return self.finding.time
        return self.latest.time if self.latest is not None else None

    @property
    def why_unknown(self) -> str:
        if self.state != "unknown" or self.latest is None:
            return ""
        if self.effect.delivery == "blind":
            return blind_reason(self.latest)
        return (
            f"the drainer journaled the intent but no outcome ({self.latest.note}); {self.effect.delivery} "
            "delivery lets recovery establish it"
        )

    @property
    def next_action(self) -> str:
        if self.state == "pending":
            return "`reel recover` drains it (nothing was sent: no intent was journaled)"
        if self.state == "not_sent":
            return (
                "fix what stopped it (see the evidence), then `reel recover` sends it again: nothing of it left, "
                f"so this is safe whatever its tier; or give it up with `reel reconcile {self.op} --outcome "
                "absent --evidence TEXT --observer NAME`"
            )
        if self.state != "unknown":
            return "none"
        return {
            "keyed": "`reel recover` resends it with the same idempotency key; the target dedups",
            "queryable": "`reel recover` asks the target's status URL and resends only on a 404 that comes after "
            "the attempt can no longer land (its absence window)",
            "two-phase": "`reel recover` asks the target about the prepared request and confirms it",
        }.get(
            self.effect.delivery,
            f"inspect the target, then `reel reconcile {self.op} --outcome succeeded|absent --evidence TEXT "
            "--observer NAME`; there is no automatic retry. Sending it again is a new effect in a new view",
        )

    def to_json(self) -> dict[str, Any]:
        doc = {
            "op": self.op,
            "state": self.state,
            "trunk": self.trunk,
            "record": self.record.hex(),
            "effect": self.effect.id.hex(),
            "index": self.index,
            "adapter": self.effect.adapter,
            "resource": self.effect.resource,
            "class": self.effect.effect_class,
            "delivery": self.effect.delivery,
            "principal": self.effect.principal,
            "evidence": self.evidence,
            "evidence_time": self.evidence_time,
            "why_unknown": self.why_unknown,
            "next_action": self.next_action,
            "journal": self.latest.id.hex() if self.latest is not None else None,
            "finding": self.finding.id.hex() if self.finding is not None else None,
        }
        if "supersedes" in self.effect.meta:
            doc["supersedes"] = str(self.effect.meta["supersedes"])
            doc["approved_by"] = str(self.effect.meta.get("approved_by", ""))
        if self.history:
            doc["history"] = [_entry_json(e) for e in self.history]
        return doc


def _entry_json(entry: Journal) -> dict[str, Any]:
    return {
        "id": entry.id.hex(),
        "state": entry.state,
        "epoch": entry.epoch,
        "time": entry.time,
        "note": entry.note,
        "receipt": thaw(entry.receipt) if entry.receipt is not None else None,
        "finding": entry.finding.hex() if entry.finding is not None else None,
    }


def trunks(repo: Repo) -> list[str]:
    return [name[len("refs/heads/") :] for name, _ in repo.refs.list("refs/heads/")]


def trunk_records(repo: Repo, trunk: str) -> Iterator[tuple[Hash, Record]]:
    """The trunk's records, newest first."""
    head = repo.refs.get(f"refs/heads/{trunk}")
    for _ in range(MAX_RECORDS):
        if head is None:
            return
        rec = repo.objects.get_as(head, Record)
        yield head, rec
        head = rec.parent


@dataclass
class Ownership:
    """Which records of one trunk this store owes drains for, and the evidence for it.

    Only records committed here are ours: one that arrived from a remote was drained by the store that
    committed it, and draining it here again would send its effects twice (reflogs never travel).
    Two independent sources say so: the trunk's reflog marks each record committed here (`commit VIEW`
    lines, each checksummed), and the drain journal's hash chain names every record whose drain has
    begun. A record is owed if either says so, so no single damaged byte of one source can make an owed
    operation vanish; a record the journal names but the reflog does not mark is a mismatch, reported
    (recover and fsck refuse with E007), never resolved by dropping or re-sending anything.
    """

    trunk: str
    records: set[Hash]
    journaled: set[Hash]
    mismatches: list[str]

    def check(self) -> None:
        """E007 naming the first mismatch, if any."""
        if self.mismatches:
            raise StorageError(
                f"which records trunk {self.trunk} owes is inconsistent: {self.mismatches[0]}"
                + (f" (and {len(self.mismatches) - 1} more)" if len(self.mismatches) > 1 else "")
                + "; run `reel fsck`; nothing is drained or resent until it is repaired",
                trunk=self.trunk,
                mismatches=self.mismatches,
            )


def ownership(repo: Repo, trunk: str) -> Ownership:
    """The records of `trunk` this store owes, from its reflog cross-checked with its drain journal.
    E007 if the reflog, the drain ref or the journal chain is damaged."""
    marked: set[Hash] = set()
    for entry in repo.refs.reflog(f"refs/heads/{trunk}"):
        if entry.new is not None and entry.message.startswith(COMMIT_MESSAGE):
            marked.add(entry.new)
    journaled = {e.record for e in drainlog.index(repo, trunk).latest.values()}
    mismatches = [
        f"record {r.hex()} has drain journal entries but the trunk's reflog does not mark it as committed here"
        for r in sorted(journaled - marked, key=bytes)
    ]
    return Ownership(trunk, marked | journaled, journaled, mismatches)


def own_records(repo: Repo, trunk: str) -> list[tuple[Hash, Record]]:
    """The trunk's records with effects that this store owes drains for (see `ownership`), newest first."""
    mine = ownership(repo, trunk).records
    return [(h, r) for h, r in trunk_records(repo, trunk) if r.effects is not None and h in mine]


def operations(repo: Repo, trunk: str | None = None) -> Iterator[Operation]:
    """Every operation this store owes or owed, oldest record first."""
    for name in [trunk] if trunk else trunks(repo):
        idx = drainlog.index(repo, name)
        records = own_records(repo, name)
        for rid, _ in reversed(records):
            items = record_effects(repo, rid)
            for i, (eid, op) in enumerate(zip(items, record_ops(repo, name, rid, items))):
                latest = idx.latest.get(op)
                effect = repo.objects.get_as(eid, Effect)
                finding = None
                if latest is not None and latest.finding is not None:
                    found = repo.objects.get(latest.finding)
                    finding = found if isinstance(found, Finding) else None
                yield Operation(op, name, rid, i, effect, latest.state if latest else "pending", latest, finding)


def list_ops(repo: Repo, unresolved: bool = False) -> list[Operation]:
    return [o for o in operations(repo) if not unresolved or o.state in UNRESOLVED]


def find(repo: Repo, name: str) -> Operation:
    """An operation by id or unique prefix (with or without `op_`), with its journal history."""
    want = name if name.startswith("op_") else "op_" + name
    if len(want) < 7:
        raise BadInput(f"operation id {name!r} is too short: give at least 4 hex digits")
    hits = [o for o in operations(repo) if o.op.startswith(want)]
    if not hits:
        raise NotFound(f"no operation {name}")
    if len(hits) > 1:
        raise BadInput(f"operation prefix {name} is ambiguous: {', '.join(o.op for o in hits[:5])}")
    found = hits[0]
    entries = [e for e in drainlog.walk(repo, drainlog.index(repo, found.trunk).head) if e.op == found.op]
    return replace(found, history=tuple(reversed(entries)))


def check_finding(outcome: str, evidence: str, observer: str) -> None:
    """The operator's finding itself: an outcome reconcile can record, with evidence and an observer."""
    if outcome not in ("succeeded", "absent"):
        raise BadInput(f"--outcome must be succeeded or absent, not {outcome!r}")
    if not evidence.strip() or not observer.strip():
        raise BadInput("a finding needs --evidence and --observer")


def check_reconcilable(op: Operation, outcome: str) -> Journal:
    """Only an unknown (or not-sent) operation is reconciled, and a not-sent one never as succeeded:
    nothing of it left. The same rule for a store of its own and a shared one. Returns the operation's
    newest journal entry, which the finding settles."""
    if op.state == "not_sent" and outcome == "succeeded":
        raise BadInput(
            f"operation {op.op} was not sent: nothing of it left this store, so it cannot have "
            "succeeded; `reel recover` sends it again, or `--outcome absent` gives it up"
        )
    if op.state not in ("unknown", "not_sent") or op.latest is None:
        if op.state == "pending":
            raise BadInput(f"operation {op.op} is pending, not unknown: nothing was sent; `reel recover` drains it")
        raise Conflict(f"operation {op.op} is already {op.state}; only an unknown outcome is reconciled")
    return op.latest


def check_absence_provable(repo: Repo, op: Operation, outcome: str) -> None:
    """An unknown operation is recorded absent only where its adapter can prove absence."""
    if outcome == "absent" and op.state == "unknown":
        from reelstore.adapters.base import adapter

        why = adapter(op.effect.adapter, repo).absence_unprovable(op.effect)
        if why:
            raise BadInput(
                f"operation {op.op} cannot be recorded absent: {why}. Record `succeeded` with "
                f"evidence, or close it: `reel ops close {op.op} --accept-uncertainty --by NAME`"
            )


def reconcile(
    repo: Repo, name: str, outcome: str, evidence: str, observer: str, *, source: str = "", scope: str = ""
) -> tuple[Operation, Finding]:
    """Store the operator's finding about an unknown operation and settle it (never sends anything).
    A not-sent operation can be given up (`absent`), never declared succeeded: nothing of it left."""
    check_finding(outcome, evidence, observer)
    found = find(repo, name)
    latest = check_reconcilable(found, outcome)
    check_absence_provable(repo, found, outcome)
    finding = Finding(found.op, latest.id, outcome, evidence, observer, drainlog.clock(), source=source, scope=scope)
    repo.objects.put(finding)
    step = drainlog.Step(
        found.record,
        found.index,
        found.effect.id,
        found.op,
        outcome,
        latest.id,
        {"finding": finding.id.hex()},
        f"reconciled by {observer}: {evidence}",
        finding.id,
    )
    (entry,) = drainlog.append(repo, found.trunk, epochs.current(repo), step, principal=observer)
    return replace(found, latest=entry, state=outcome, finding=finding, history=(*found.history, entry)), finding


@dataclass(frozen=True)
class OpSource:
    """Where the operator contract finds operations: this store's drain journal, or (a shared store)
    the outbox every worker writes."""

    find: Callable[[Repo, str], Operation]
    list_ops: Callable[[Repo, bool], list[Operation]]


LOCAL = OpSource(find, list_ops)
