"""A trunk's history: its records, newest first, each with what became of its effects.

Outcomes come from the drain journal (`refs/drains/<trunk>`): the newest entry of each operation,
where the operation id is derived from the record and the effect's index. An effect with no entry
yet is `pending` (committed, not yet drained).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Any

from reelstore import revisions
from reelstore.backend.repo import Repo
from reelstore.drain import journal as drainlog
from reelstore.drain.drainer import record_ops
from reelstore.drain.ops import trunk_records
from reelstore.errors import BadInput
from reelstore.objects import Effect, Effects, Hash, Journal, Record, View
from reelstore.objects.ref import trunk_ref


@dataclass(frozen=True)
class EffectOutcome:
    """One effect of a logged record and its drain state (`pending` before its first journal entry)."""

    index: int
    op: str
    effect: Hash
    adapter: str
    resource: str
    state: str

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "op": self.op,
            "effect": self.effect.hex(),
            "adapter": self.adapter,
            "resource": self.resource,
            "state": self.state,
        }


@dataclass(frozen=True)
class LogEntry:
    """One trunk record as `reel log` shows it, with its effects' outcomes in firing order."""

    record: Hash
    parent: Hash | None
    time_ms: int
    author: str
    message: str
    view: str | None
    view_id: Hash | None
    effects: tuple[EffectOutcome, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "record": self.record.hex(),
            "parent": self.parent.hex() if self.parent else None,
            "time": self.time_ms,
            "author": self.author,
            "message": self.message,
            "view": self.view,
            "view_id": self.view_id.hex() if self.view_id else None,
            "effects": [e.to_json() for e in self.effects],
        }


def log(repo: Repo, trunk: str, limit: int | None = None) -> list[LogEntry]:
    """Records of `trunk` from its head back to its root (or `limit` of them)."""
    repo.refs[trunk_ref(trunk)]  # E001 for a trunk that does not exist
    return _entries(repo, ((h, rec, trunk) for h, rec in trunk_records(repo, trunk)), limit)


def log_revisions(repo: Repo, args: Sequence[str], limit: int | None = None) -> tuple[str, list[LogEntry]]:
    """git's `log REV...`: the records the revision list `args` selects (`B`, `A..B`, `^A B`, `A...B`;
    reelstore.revisions), tip by tip, each tip's newest first. A record's effect outcomes come from the
    drain journal of the trunk its tip names (`main~3..main`: main; an id or a remote-tracking ref:
    the store's trunk). Returns the first tip's trunk and the entries; E014 if a tip is not a record."""
    tips, hidden = revisions.select(repo, args)
    for text, h in tips:
        obj = repo.objects.get(h)
        if not isinstance(obj, Record):
            raise BadInput(f"{text!r} names a {obj.kind}, not a record; log shows a trunk's records")
    trunks = [revisions.trunk_of(repo, text) or repo.trunk for text, _ in tips]

    def records() -> Iterator[tuple[Hash, Record, str]]:
        shown = set(hidden)
        for (text, h), trunk in zip(tips, trunks):
            for obj in revisions.selected(repo, [(text, h)], shown):
                shown.add(obj.id)
                if isinstance(obj, Record):
                    yield obj.id, obj, trunk

    return (trunks[0] if trunks else repo.trunk), _entries(repo, records(), limit)


MAX_LIMIT = (1 << 63) - 1
"""The largest record count a log takes (any larger number means "all" in practice)."""


def check_limit(limit: int | None) -> int | None:
    """E014 naming `limit` unless it is None or an integer from 0 to 2^63-1."""
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or not 0 <= limit <= MAX_LIMIT):
        raise BadInput(f"limit must be an integer from 0 to {MAX_LIMIT}, not {limit!r}", field="limit")
    return limit


def _entries(repo: Repo, records: Iterable[tuple[Hash, Record, str]], limit: int | None) -> list[LogEntry]:
    check_limit(limit)
    journals: dict[str, dict[str, Journal]] = {}
    out: list[LogEntry] = []
    for h, rec, trunk in islice(records, limit):
        journal = journals.get(trunk)
        if journal is None:
            journal = journals[trunk] = drainlog.index(repo, trunk).latest
        view_name = None
        if rec.view is not None and repo.objects.has(rec.view):
            view = repo.objects.get(rec.view)
            if isinstance(view, View):
                view_name = str(view.meta.get("name", "")) or None
        outcomes: list[EffectOutcome] = []
        if rec.effects is not None:
            block = repo.objects.get(rec.effects)
            if isinstance(block, Effects):
                for i, (eid, op) in enumerate(zip(block.items, record_ops(repo, trunk, h, block.items))):
                    latest = journal.get(op)
                    e = repo.objects.get(eid)
                    adapter, resource = (e.adapter, e.resource) if isinstance(e, Effect) else ("?", "?")
                    outcomes.append(
                        EffectOutcome(i, op, eid, adapter, resource, latest.state if latest is not None else "pending")
                    )
        out.append(
            LogEntry(h, rec.parent, rec.time or 0, rec.author, rec.message, view_name, rec.view, tuple(outcomes))
        )
    return out
