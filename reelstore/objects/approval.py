"""Approvals (`approval`): a named principal's sign-off on, or refusal of, exactly what a view would fire.

An approval names the view's lineage (its fork id) and the exact pending-effects object and namespace
root it saw, so any later change to the view (a new or changed effect, a put) leaves it naming objects
the view no longer holds: it is stale and counts for nothing. It records who approved (`by`), which
principal wrote it and how that principal was established (`via`), since a name alone proves little.
The view object lists its approvals, so they travel with the view wherever it is pushed or fetched,
and the committed view, which a record names, keeps the ones its effects carried.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from reelstore.objects.block import Object, register, v_enum, v_hash, v_int, v_opt, v_str
from reelstore.objects.hash import Hash

if TYPE_CHECKING:
    from reelstore.objects.view import View

VERDICTS = ("approve", "reject")
VIA = ("REEL_PRINCIPAL", "user.name", "login")
"""How the writing principal was established: the environment, the store's config, the login name."""


@register
@dataclass(frozen=True)
class Approval(Object):
    kind: ClassVar[str] = "approval"
    verdict: str
    view: str
    """The view's name when it was approved (for people; the binding is `fork`, `effects`, `namespace`)."""
    fork: str
    effects: Hash | None
    """The exact pending-effects object approved (None: a view with no pending effect)."""
    namespace: Hash
    by: str
    """Who approves or refuses."""
    principal: str
    """The principal of the process that wrote this object."""
    via: str
    time: int
    note: str = ""
    SPEC: ClassVar = {
        "by": ("by", v_str(256, empty=False)),
        "effects": ("effects", v_opt(v_hash)),
        "fork": ("fork", v_str(128, empty=False)),
        "namespace": ("namespace", v_hash),
        "note": ("note", v_str(1 << 14)),
        "principal": ("principal", v_str(256, empty=False)),
        "time": ("time", v_int()),
        "verdict": ("verdict", v_enum(*VERDICTS)),
        "via": ("via", v_enum(*VIA)),
        "view": ("view", v_str(1024, empty=False)),
    }

    def references(self) -> tuple[Hash, ...]:
        return (self.namespace,) if self.effects is None else (self.effects, self.namespace)

    def binds(self, fork: str, effects: Hash | None, namespace: Hash) -> bool:
        """Does this approval name exactly this view state?"""
        return self.fork == fork and self.effects == effects and self.namespace == namespace


def fault(approval: Approval, view: View, queued_by: Sequence[str]) -> str | None:
    """Why `approval`, listed by committed `view` (whose effects were queued by `queued_by`), could not
    have let its effects fire, or None: a refusal, an approval of another state, or one by the view's
    initiator or an effect's principal (rules a commit enforces; fsck checks that they held)."""
    fork = str(view.meta.get("fork", "")) or view.id.hex()
    if approval.verdict != "approve":
        return f"a {approval.verdict} by {approval.by}, not an approval"
    if not approval.binds(fork, view.effects, view.namespace):
        return f"by {approval.by}, it names other pending effects or names than the view holds"
    barred = {str(view.meta.get("principal", "")), *queued_by} - {""}
    who = {approval.by, approval.principal} & barred
    if who:
        return (
            f"by {approval.by}, recorded by {approval.principal}: {', '.join(sorted(who))} started the view or "
            "queued its effects"
        )
    return None
