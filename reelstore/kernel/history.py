"""A trunk's history: its records, newest first, each with what became of its effects.

Outcomes come from the drain journal (`refs/drains/<trunk>`): the newest entry of each operation,
where the operation id is derived from the record and the effect's index. An effect with no entry
yet is `pending` (committed, not yet drained).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import islice
from typing import Any

from reelstore.drain import log as drainlog
from reelstore.drain.drainer import record_ops
from reelstore.drain.ops import trunk_records
from reelstore.kernel.names import trunk_ref
from reelstore.objects import Effect, Effects, Hash, View
from reelstore.storage.repo import Repo


@dataclass
class EffectOutcome:
    index: int
    op: str
    effect: Hash
    adapter: str
    resource: str
    state: str

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "op": self.op, "effect": self.effect.hex(), "adapter": self.adapter,
                "resource": self.resource, "state": self.state}


@dataclass
class LogEntry:
    record: Hash
    parent: Hash | None
    time_ms: int
    author: str
    message: str
    view: str | None
    view_id: Hash | None
    effects: list[EffectOutcome] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"record": self.record.hex(), "parent": self.parent.hex() if self.parent else None,
                "time": self.time_ms, "author": self.author, "message": self.message, "view": self.view,
                "view_id": self.view_id.hex() if self.view_id else None,
                "effects": [e.to_json() for e in self.effects]}


def log(repo: Repo, trunk: str, limit: int | None = None) -> list[LogEntry]:
    """Records of `trunk` from its head back to its root (or `limit` of them)."""
    repo.refs[trunk_ref(trunk)]  # E001 for a trunk that does not exist
    journal = drainlog.index(repo, trunk).latest
    out: list[LogEntry] = []
    for h, rec in islice(trunk_records(repo, trunk), limit):
        view_name = None
        if rec.view is not None and repo.objects.has(rec.view):
            view = repo.objects.get(rec.view)
            if isinstance(view, View):
                view_name = str(view.meta.get("name", "")) or None
        entry = LogEntry(h, rec.parent, rec.time or 0, rec.author, rec.message, view_name, rec.view)
        if rec.effects is not None:
            block = repo.objects.get(rec.effects)
            if isinstance(block, Effects):
                for i, (eid, op) in enumerate(zip(block.items, record_ops(repo, trunk, h, block.items))):
                    latest = journal.get(op)
                    e = repo.objects.get(eid)
                    adapter, resource = (e.adapter, e.resource) if isinstance(e, Effect) else ("?", "?")
                    entry.effects.append(EffectOutcome(i, op, eid, adapter, resource,
                                                       latest.state if latest is not None else "pending"))
        out.append(entry)
    return out
