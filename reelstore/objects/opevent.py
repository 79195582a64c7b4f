"""Operator events (`opevent`): who owns an unresolved operation, who was told, who acknowledged it.

The AGI Reactor specimen's operator contract keeps these apart: an assignment is not an alert, an
alert delivered is not an alert acknowledged, and none of them settles the operation. Each event is
attributed (`actor`), timed, and chained to the operation's previous event (`prev`), so an
operation's operator history is a hash chain, as the drain journal is; `refs/ops/<op>` points at
the newest event of each operation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from reelstore.objects.block import Object, register, v_enum, v_hash, v_int, v_opt, v_str
from reelstore.objects.hash import Hash

ACTIONS = ("assign", "escalate", "notify", "ack", "close")


@register
@dataclass(frozen=True)
class OpEvent(Object):
    kind: ClassVar[str] = "opevent"
    op: str
    action: str
    actor: str
    """Who did it (for `notify`, the store's principal that ran the notifier)."""
    time: int
    to: str = ""
    """assign: the new assignee; escalate: the escalation owner; notify: who the notice was for."""
    deadline: int = 0
    """escalate: when the operation is overdue (ms since the epoch); 0 for none."""
    result: str = ""
    """notify: how the delivery went (`delivered`, or why not)."""
    note: str = ""
    prev: Hash | None = None
    SPEC: ClassVar = {
        "action": ("action", v_enum(*ACTIONS)),
        "actor": ("actor", v_str(256, empty=False)),
        "deadline": ("deadline", v_int()),
        "note": ("note", v_str(1 << 14)),
        "op": ("op", v_str(128, empty=False)),
        "prev": ("prev", v_opt(v_hash)),
        "result": ("result", v_str(1 << 12)),
        "time": ("time", v_int()),
        "to": ("to", v_str(256)),
    }

    def references(self) -> tuple[Hash, ...]:
        return (self.prev,) if self.prev is not None else ()
