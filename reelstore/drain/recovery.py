"""`reel recover`: start a new epoch, then resume every drain that did not finish.

The new epoch fences every drainer still alive from before (it can neither journal nor fire). Each
record whose effects are not all settled is drained again in trunk order with `recovering=True`:
an effect journaled `not_sent` is sent again whatever its tier (nothing of it left); an unknown keyed
effect is resent with the same key, queryable and two-phase ones are reconciled first, blind ones stay
unknown. A record committed whose drain never journaled anything is drained from the start.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from reelstore.drain import epoch as epochs
from reelstore.drain import hold as holds
from reelstore.drain import journal as drainlog
from reelstore.drain.drainer import DrainReport, drain, failed_message, failed_next, record_effects, record_ops
from reelstore.drain.ops import own_records, ownership, trunks
from reelstore.errors import EffectFailed, OutcomeUnknown
from reelstore.objects import Hash
from reelstore.wording import plural

if TYPE_CHECKING:
    from reelstore.backend.repo import Repo


@dataclass
class RecoveryReport:
    epoch: int
    drains: list[DrainReport] = field(default_factory=list)

    @property
    def unknown(self) -> list[str]:
        return [d.halted.op for d in self.drains if d.halted is not None and d.halted.state == "unknown"]

    @property
    def not_sent(self) -> list[str]:
        return [o.op for d in self.drains for o in d.outcomes if o.state == "not_sent"]

    def check(self) -> None:
        """Raise unless every effect of every record drained succeeded: E012 if a hold stopped it,
        E011 if an operation is still unknown (exit 7), E017 if one failed or was not sent (exit 9)."""
        for d in self.drains:
            if d.held is not None:
                d.check()
        failed = [o for d in self.drains for o in d.undone]
        if self.unknown:
            also = f" Also not done: {', '.join(o.op for o in failed)}." if failed else ""
            raise OutcomeUnknown(
                f"{plural(len(self.unknown), 'operation')} still unknown: {', '.join(self.unknown)}. "
                "Nothing after them was sent. Inspect with `reel ops --unresolved`, record what you "
                "establish with `reel reconcile OP --outcome succeeded|absent --evidence TEXT "
                f"--observer NAME`, then run `reel recover` again.{also}",
                ops=[*self.unknown, *(o.op for o in failed)],
                next_action="reel ops --unresolved",
                result=self,
            )
        if failed:
            raise EffectFailed(
                failed_message(failed), ops=[o.op for o in failed], next_action=failed_next(failed), result=self
            )

    def to_json(self) -> dict[str, Any]:
        return {
            "epoch": self.epoch,
            "unknown": self.unknown,
            "not_sent": self.not_sent,
            "drains": [d.to_json() for d in self.drains],
        }


def unfinished(repo: Repo) -> list[tuple[str, Hash]]:
    """(trunk, record) for every record committed here with an effect not yet settled, oldest first."""
    out: list[tuple[str, Hash]] = []
    for trunk in trunks(repo):
        ownership(repo, trunk).check()
        idx = drainlog.index(repo, trunk)
        todo = []
        for rid, _ in own_records(repo, trunk):
            items = record_effects(repo, rid)
            states = [idx.latest.get(op) for op in record_ops(repo, trunk, rid, items)]
            if any(s is None or s.state not in drainlog.FINAL for s in states):
                todo.append((trunk, rid))
        out.extend(reversed(todo))
    return out


def recover(repo: Repo) -> RecoveryReport:
    """Fence older drainers with a new epoch and resume every unfinished drain (E012 if held; E007,
    before any epoch is started, if a ref, reflog or journal it needs is damaged or they disagree)."""
    holds.check(repo)
    for trunk in trunks(repo):
        ownership(repo, trunk).check()
    report = RecoveryReport(epochs.bump(repo))
    for trunk, record in unfinished(repo):
        report.drains.append(drain(repo, trunk, record, epoch=report.epoch, recovering=True))
    return report
