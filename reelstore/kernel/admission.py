"""Authority: a trunk's capabilities, narrowing at fork, and the checks every verb passes.

Three rules. A capability is checked on segment boundaries of the name it guards (`prefix_covers`).
A child's capability must be covered, on every axis, by one of its parent's (I-003 narrowing). A
capability's budget counts the effects in the view's buffer it covers, its own and those merged from
isolated children, so merging a child can never take a view past its parent's budget.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from reelstore.backend.repo import Repo
from reelstore.errors import BudgetExhausted, CapabilityViolation
from reelstore.objects import OPS, Capability, Hash

if TYPE_CHECKING:
    from reelstore.objects import Effect, View

AXES = ("ops", "prefix", "expiry", "budget")


def now_s() -> int:
    return int(time.time())


def trunk_caps(repo: Repo, trunk: str) -> tuple[Capability, ...]:
    """The trunk's authority, from config `trunk.NAME.cap` (multi-valued); unset means everything."""
    specs = repo.config.get_all(f"trunk.{trunk}.cap")
    if not specs:
        return (Capability.make(OPS, ""),)
    return tuple(Capability.parse(spec) for spec in specs)


def view_caps(repo: Repo, view: View) -> tuple[Capability, ...]:
    return tuple(repo.cache.load(h, Capability) for h in view.caps)


def narrow(parent: Sequence[Capability], requested: Iterable[Capability]) -> tuple[Capability, ...]:
    """`requested` if each is covered by some parent capability, else E009 naming the axis."""
    out = []
    for child in requested:
        axes = [cap.widening(child) for cap in parent]
        if None not in axes:
            axis = max(axes, key=AXES.index) if axes else "ops"
            raise CapabilityViolation(
                f"capability {child.spec()!r} widens the parent's authority on the {axis} axis",
                axis=axis,
                capability=child.spec(),
            )
        out.append(child)
    return tuple(out)


def require(caps: Sequence[Capability], op: str, name: str) -> Capability:
    """The capability that lets this view `op` on `name` now: E009 if none covers it, E013 if only
    expired ones do."""
    now = now_s()
    expired = None
    for cap in caps:
        if cap.allows(op, name, now):
            return cap
        if cap.allows(op, name):
            expired = cap
    if expired is not None:
        raise BudgetExhausted(f"capability {expired.spec()!r} for {op} on {name!r} has expired", op=op, name=name)
    raise CapabilityViolation(f"the view has no {op} capability on {name!r}", op=op, name=name)


def fire_op(effect: Effect) -> str:
    """The capability operation an effect needs: fire_b for Class B, fire_c for Class C."""
    return "fire_b" if effect.effect_class == "B" else "fire_c"


class Tally:
    """Running totals of a view's effect buffer against its capabilities: how many effects it holds
    and how many each budgeted capability has paid for. Admitting one more effect checks it against
    these totals alone, so its cost does not grow with the buffer."""

    def __init__(self, caps: Sequence[Capability], count: int = 0, spent: dict[Hash, int] | None = None) -> None:
        self.caps = tuple(caps)
        self.count = count
        self.spent: dict[Hash, int] = {c.id: 0 for c in self.caps if c.budget is not None}
        """Budgeted capability id -> effects of the buffer it covers (expired or not)."""
        if spent is not None:
            self.spent.update((k, v) for k, v in spent.items() if k in self.spent)

    @classmethod
    def of(cls, caps: Sequence[Capability], effects: Iterable[Effect]) -> Tally:
        """The totals of a buffer holding `effects`."""
        tally = cls(caps)
        for e in effects:
            tally.add(e)
        return tally

    def check(self, effect: Effect) -> Capability:
        """The capability `effect` would be admitted under: fire_b / fire_c on its resource, not
        expired, with budget left (E009 / E013). Changes nothing."""
        op = fire_op(effect)
        require(self.caps, op, effect.resource)
        now = now_s()
        for cap in self.caps:
            if not cap.allows(op, effect.resource, now):
                continue
            if cap.budget is None or self.spent[cap.id] < cap.budget:
                return cap
        raise BudgetExhausted(f"every capability for {op} on {effect.resource!r} has spent its budget", op=op)

    def add(self, effect: Effect) -> None:
        """Count `effect` into the buffer (each budgeted capability covering it pays for it)."""
        self.count += 1
        op = fire_op(effect)
        for cap in self.caps:
            if cap.budget is not None and cap.allows(op, effect.resource):
                self.spent[cap.id] += 1

    def admit(self, effect: Effect) -> Capability:
        """`check`, then `add`."""
        cap = self.check(effect)
        self.add(effect)
        return cap


def admit_secrets(caps: Sequence[Capability], named: Sequence[str], resource: str) -> None:
    """E009 unless a `secret` capability grants every credential the effect names for its resource."""
    for ref in named:
        grant = f"{ref}@{resource}"
        if not any(cap.allows("secret", grant, now_s()) for cap in caps):
            raise CapabilityViolation(
                f"the view may not send the credential {ref!r} to {resource!r}: no capability grants it "
                f"(--cap secret={ref}@{resource.rsplit('/', 1)[0]}/ would)",
                op="secret",
                name=grant,
            )


def without_secrets(caps: Sequence[Capability]) -> tuple[Capability, ...]:
    """`caps` granting no credential: for a door whose caller may not choose which secrets go where."""
    kept = (
        Capability.make([o for o in c.ops if o != "secret"], c.prefix, c.expires_at, c.budget)
        for c in caps
        if set(c.ops) - {"secret"}
    )
    return tuple(kept)


def check_budgets(caps: Sequence[Capability], effects: Sequence[Effect]) -> None:
    """Every effect of a buffer is still authorised, unexpired and within budget (E009 / E013): checked
    when a child merges and again at commit, so an effect never fires on authority that has lapsed."""
    tally = Tally(caps)
    for e in effects:
        tally.admit(e)
