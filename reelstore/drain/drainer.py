"""The drain: a committed record's effects, sent in order, each one journaled before it leaves.

For every effect: a journal entry `unknown` is made durable first (the intent), then a single-use
fire token is minted for that effect and this epoch, the adapter sends, and the outcome is journaled.
A crash at any point leaves the journal showing exactly which sends may have happened. Each outcome is
one of four fates (`reelstore.adapters.base.FATES`): `succeeded`, `failed`, `not_sent` (provably
nothing left: safe to send again, whatever the tier) or `unknown`. The drain halts at the first effect
that is `unknown` or `not_sent` (later effects may depend on it); `reel recover` sends a `not_sent`
effect again, resumes an `unknown` one according to its delivery tier, and never resends a blind one.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from reelstore.adapters.base import FATES, Adapter, NotSent, Result, adapter
from reelstore.attribution import now_ms
from reelstore.crashpoints import crash_point
from reelstore.drain import epoch as epochs
from reelstore.drain import hold as holds
from reelstore.drain import journal as drainlog
from reelstore.drain import owners
from reelstore.drain.owners import item_ops
from reelstore.drain.owners import op_id as op_id
from reelstore.errors import (
    CapabilityViolation,
    Conflict,
    EffectFailed,
    Held,
    OutcomeUnknown,
    ReelError,
    StaleEpoch,
)
from reelstore.hooks.runner import run_pre_hook
from reelstore.objects import Effect, Effects, Hash, Journal, Record
from reelstore.wording import plural

if TYPE_CHECKING:
    from reelstore.backend.repo import Repo

FINAL = drainlog.FINAL

FOLLOW_EVERY = 64
"""A drain moves the drain ref at its first journal append, every this many after, and at its end, not
at every append: the segment is the durable record and readers start from it, so the ref only needs
to stay near it for gc, fsck and bundles (and a crash leaves it behind in any case, to be caught up)."""


def record_ops(repo: Repo, trunk: str, record: Hash, items: tuple[Hash, ...] | None = None) -> list[str]:
    """The operation id of each effect of `record` (on `trunk`), in order."""
    items = record_effects(repo, record) if items is None else items
    return item_ops(repo, trunk, items)


COMMIT_MESSAGE = "commit "


def commit_message(view: str) -> str:
    """The trunk reflog message of a commit made here; it marks the record as this store's to drain."""
    return COMMIT_MESSAGE + view


class FireToken:
    """The capability to send one effect, once, under one epoch. Only the drain can mint one.

    An adapter must call `consume(effect.id)` before any outside action: it fails if the token is
    forged, spent, bound to another effect, or if its epoch has been fenced by a recovery.
    """

    __slots__ = ("_effect", "_epoch", "_repo", "_used", "__weakref__")
    _effect: Hash
    _epoch: int
    _repo: weakref.ref[Repo]
    _used: bool

    def __init__(self, *_: Any, **__: Any) -> None:
        raise CapabilityViolation("a fire token is minted only inside the drain of a committed record")

    def __reduce__(self) -> Any:
        raise CapabilityViolation("a fire token cannot be copied or serialised")

    def __copy__(self) -> FireToken:
        raise CapabilityViolation("a fire token cannot be copied")

    def __deepcopy__(self, memo: Any) -> FireToken:
        raise CapabilityViolation("a fire token cannot be copied")

    @property
    def used(self) -> bool:
        return bool(getattr(self, "_used", False))

    @property
    def effect(self) -> Hash:
        return self._effect

    def consume(self, effect_id: Hash) -> None:
        if not _genuine(self):
            raise CapabilityViolation("this fire token was not minted by the drain")
        if self._used:
            raise CapabilityViolation("this fire token was already used: an effect is sent at most once per token")
        if effect_id != self._effect:
            raise CapabilityViolation("this fire token is bound to another effect")
        repo = self._repo()
        if repo is None:
            raise CapabilityViolation("this fire token outlived its store")
        # The epoch file is replaced atomically, so this read sees the epoch before or after a recovery's
        # bump, whole; the send follows outside any lock either way, so taking the drain lock here again
        # (once per effect, beside the intent's append) would order nothing more.
        epochs.check(repo, self._epoch)
        self._used = True


def _minting() -> tuple[Callable[[Repo, Hash, int], FireToken], Callable[[FireToken], bool]]:
    minted: weakref.WeakSet[FireToken] = weakref.WeakSet()

    def mint(repo: Repo, effect: Hash, epoch: int) -> FireToken:
        token = object.__new__(FireToken)
        token._effect, token._epoch, token._repo, token._used = effect, epoch, weakref.ref(repo), False
        minted.add(token)
        return token

    def genuine(token: FireToken) -> bool:
        return token in minted

    return mint, genuine


_mint, _genuine = _minting()
del _minting


@dataclass
class Outcome:
    """What the drain did with one effect."""

    index: int
    op: str
    effect: Hash
    state: str
    """pending | not_sent | unknown | succeeded | failed | absent."""
    action: str
    """sent | resent | tried | retried | reconciled | already | halted | held | not-reached | yielded |
    refused (owned by another record or an abort: journaled failed, never sent).
    `tried` / `retried`: an attempt that ended `not_sent` (nothing left, so "sent" would be untrue)."""
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "op": self.op,
            "effect": self.effect.hex(),
            "state": self.state,
            "action": self.action,
            "note": self.note,
        }


OWED = ("not_sent", "unknown", "pending")
"""States of an operation a committed record still owes: it is settled where it is, never queued again."""


@dataclass
class DrainReport:
    trunk: str
    record: Hash
    epoch: int
    outcomes: list[Outcome] = field(default_factory=list)
    halted: Outcome | None = None
    """The first effect whose outcome is unknown or not_sent; nothing after it was sent."""
    held: str | None = None
    yielded: bool = False
    """Another drainer owns this record's next operation; this one stepped aside."""
    adapters: dict[str, Adapter] = field(default_factory=dict, repr=False)
    deferred: drainlog.Step | None = field(default=None, repr=False)
    """The last outcome, written together with the next intent (one frame) or when the drain ends."""
    journaled: int = field(default=0, repr=False)
    """Journal appends this drain made."""
    holders: owners.Owners | None = field(default=None, repr=False)
    """Who holds which operation elsewhere in the store, looked up once per drain (at its first send)."""
    lagging: bool = field(default=False, repr=False)
    """The drain ref is behind the segment (it follows every FOLLOW_EVERY appends and at the end)."""

    @property
    def complete(self) -> bool:
        return all(o.state in FINAL for o in self.outcomes)

    @property
    def sent(self) -> int:
        return sum(o.action in ("sent", "resent") for o in self.outcomes)

    @property
    def unknown(self) -> list[str]:
        return [o.op for o in self.outcomes if o.state == "unknown"]

    @property
    def undone(self) -> list[Outcome]:
        """Effects that definitely did not happen: failed, not sent, or settled absent by an operator."""
        return [o for o in self.outcomes if o.state in ("failed", "not_sent", "absent")]

    def check(self, result: Any = None) -> None:
        """Raise unless every effect of the record succeeded: E012 if held, E011 if an outcome is
        unknown (it dominates: it needs an operator), E017 if one failed or was not sent.
        `result` (the caller's CommitResult) travels on the exception."""
        if self.held is not None:
            raise Held(
                f"draining stopped: the store is on hold ({self.held}); record {self.record.hex()} has "
                "effects still pending; `reel release` then `reel recover` resumes them"
            )
        failed = self.undone
        owed = [o.op for o in self.outcomes if o.state in OWED]
        committed = f"committed as record {self.record.hex()}; {plural(len(owed), 'effect')} owed"
        if self.halted is not None and self.halted.state == "unknown":
            also = f" Also not done: {failed_summary(failed)}." if failed else ""
            settle = (
                f"an operator: `reel ops show {self.halted.op}`, then `reel reconcile {self.halted.op} --outcome "
                "succeeded|absent`, then `reel recover` sends what follows it"
            )
            raise OutcomeUnknown(
                f"{committed} (the commit stands; do not queue them again): {unknown_message(self.halted)}{also}",
                ops=[self.halted.op, *(o.op for o in failed)],
                next_action=f"reel ops show {self.halted.op}",
                result=result,
                op=self.halted.op,
                committed=self.record.hex(),
                owed=owed,
                settled_by=settle,
            )
        if failed:
            final = [o for o in failed if o.state not in OWED]
            settle = (
                (
                    "`reel recover` (`Store.recover()`), once the cause is fixed; or an operator, who gives one up "
                    "with `reel reconcile OP --outcome absent`"
                )
                if owed
                else ""
            )
            gone = f", {plural(len(final), 'effect')} failed for good" if final else ""
            why = "the commit stands; do not queue the owed ones again" if owed else "the commit stands"
            raise EffectFailed(
                f"{committed}{gone} ({why}): {failed_summary(failed)}. Next: {failed_next(failed)}",
                ops=[o.op for o in failed],
                next_action=failed_next(failed),
                result=result,
                committed=self.record.hex(),
                owed=owed,
                settled_by=settle,
            )

    def to_json(self) -> dict[str, Any]:
        return {
            "trunk": self.trunk,
            "record": self.record.hex(),
            "epoch": self.epoch,
            "complete": self.complete,
            "halted": self.halted.op if self.halted else None,
            "held": self.held,
            "yielded": self.yielded,
            "outcomes": [o.to_json() for o in self.outcomes],
        }


def failed_summary(outcomes: list[Outcome]) -> str:
    def told(o: Outcome) -> str:
        return o.note if o.note.startswith("not sent") else f"{o.state.replace('_', ' ')}: {o.note}"

    return "; ".join(f"operation {o.op} (effect {o.index}) {told(o)}" for o in outcomes)


def failed_next(outcomes: list[Outcome]) -> str:
    if any(o.state == "not_sent" for o in outcomes):
        return (
            "fix what stopped the send, then `reel recover` sends every not-sent effect again (nothing of it "
            "left, so this is safe for any tier); `reel reconcile OP --outcome absent` gives one up"
        )
    return "nothing to retry: a failed effect is final; make a new effect in a new view to try again"


def failed_message(outcomes: list[Outcome]) -> str:
    n = len(outcomes)
    what = f"{plural(n, 'effect')} did not happen"
    return f"{what}: {failed_summary(outcomes)}. Next: {failed_next(outcomes)}"


def unknown_message(outcome: Outcome) -> str:
    return (
        f"the outcome of operation {outcome.op} (effect {outcome.index} of the record) is unknown: "
        f"{outcome.note}. Nothing after it was sent. Inspect it with `reel ops show {outcome.op}`, then "
        f"record what you establish with `reel reconcile {outcome.op} --outcome succeeded|absent "
        "--evidence TEXT --observer NAME` and run `reel recover` to continue"
    )


def record_effects(repo: Repo, record: Hash) -> tuple[Hash, ...]:
    """The record's effects in order (a record this process just wrote is decoded already)."""
    rec = repo.cache.load(record, Record)
    return () if rec.effects is None else repo.cache.load(rec.effects, Effects).items


def drain(repo: Repo, trunk: str, record: Hash, *, epoch: int | None = None, recovering: bool = False) -> DrainReport:
    """Send `record`'s effects in order. Never raises for an unknown outcome or a hold: see `DrainReport.check`.

    `recovering` resumes operations an earlier drainer left unknown, by tier; a plain drain (right
    after commit) halts on them instead. Raises StaleEpoch (E016) if a recovery fenced this drainer,
    and CapabilityViolation (E009) if the pre-drain hook refuses (nothing is sent; all stays pending).
    """
    report = DrainReport(trunk, record, epochs.current(repo) if epoch is None else epoch)
    items = record_effects(repo, record)
    if not items:  # nothing to send or journal (a drain ref a crash left behind is caught up by the next drain)
        return report
    drainlog.catch_up(repo, trunk)
    idx = drainlog.index(repo, trunk)
    ops = record_ops(repo, trunk, record, items)
    owed = [i for i in range(len(items)) if getattr(idx.latest.get(ops[i]), "state", None) not in FINAL]
    if owed:
        context = {"REEL_TRUNK": trunk, "REEL_RECORD": record.hex(), "REEL_EFFECTS": str(len(owed))}
        run_pre_hook(repo, "pre-drain", context)
    for index, effect_id in enumerate(items):
        op = ops[index]
        if report.halted is not None or report.held is not None or report.yielded:
            report.outcomes.append(Outcome(index, op, effect_id, _state_of(repo, trunk, op), "not-reached"))
            continue
        try:
            holds.check(repo)
        except Held as exc:
            report.held = str(exc.details.get("why", exc.message))
            report.outcomes.append(Outcome(index, op, effect_id, _state_of(repo, trunk, op), "held"))
            continue
        try:
            outcome = _drain_one(repo, report, index, op, effect_id, recovering)
        except Conflict as exc:
            outcome = Outcome(index, op, effect_id, _state_of(repo, trunk, op), "yielded", exc.message)
            report.yielded = True
        report.outcomes.append(outcome)
        if outcome.state in ("unknown", "not_sent") and not report.yielded:
            report.halted = outcome
    _journal(repo, report, None)
    if report.lagging:
        drainlog.catch_up(repo, trunk)
    return report


def _journal(repo: Repo, report: DrainReport, step: drainlog.Step | None) -> Journal | None:
    """Write the deferred outcome, if any, and `step` after it, durably as one append (the last one of
    the drain, `step` None, also brings the drain ref up to date)."""
    steps = [s for s in (report.deferred, step) if s is not None]
    if not steps:
        return None
    follow = step is None or report.journaled % FOLLOW_EVERY == 0
    entries = drainlog.append(repo, report.trunk, report.epoch, *steps, follow=follow)
    report.journaled += 1
    report.lagging = not follow
    report.deferred = None
    return entries[-1] if step is not None else None


def _state_of(repo: Repo, trunk: str, op: str) -> str:
    latest = drainlog.index(repo, trunk).latest.get(op)
    return latest.state if latest is not None else "pending"


def _drain_one(repo: Repo, report: DrainReport, index: int, op: str, effect_id: Hash, recovering: bool) -> Outcome:
    latest = drainlog.known(repo, report.trunk).latest.get(op)
    if latest is not None and latest.state in FINAL:
        return Outcome(index, op, effect_id, latest.state, "already", latest.note)
    effect = repo.cache.load(effect_id, Effect)  # just admitted, in a long-lived process: decoded already
    impl = report.adapters.get(effect.adapter)
    if impl is None:
        try:
            impl = report.adapters[effect.adapter] = adapter(effect.adapter, repo)
        except ReelError as exc:
            return _unsendable(repo, report, effect, index, op, latest, exc)
    if latest is None:
        if report.holders is None:
            report.holders = owners.Owners(repo, journals_of=report.trunk)
        held = report.holders.foreign(report.record, op)
        if held is not None:
            return _refused(repo, report, effect, index, op, held)
        return _send(repo, report, impl, effect, index, op, None, "sent")
    if latest.state == "not_sent":
        if not recovering:
            return Outcome(
                index,
                op,
                effect_id,
                "not_sent",
                "halted",
                f"an earlier attempt was not sent ({latest.note}); `reel recover` sends it again",
            )
        return _send(repo, report, impl, effect, index, op, latest, "resent")
    if not recovering:
        return Outcome(
            index,
            op,
            effect_id,
            "unknown",
            "halted",
            f"an earlier attempt's outcome is unknown ({latest.note}); `reel recover` decides by tier",
        )
    if latest.epoch >= report.epoch:
        raise Conflict(
            f"operation {op} was journaled under the current epoch {latest.epoch} by a drainer that may "
            "still be running; it is left to that drainer (a later `reel recover` takes it over)",
            op=op,
        )
    verdict, note = resume_by_tier(impl, effect, op, latest.time, latest.note)
    if verdict == "send":
        return _send(repo, report, impl, effect, index, op, latest, "resent")
    if verdict == "succeeded":
        _journal(
            repo,
            report,
            drainlog.Step(report.record, index, effect_id, op, "succeeded", latest.id, {"reconciled": True}, note),
        )
        return Outcome(index, op, effect_id, "succeeded", "reconciled", note)
    return Outcome(index, op, effect_id, "unknown", "halted", note)


def resume_by_tier(impl: Adapter, effect: Effect, op: str, began_ms: int, last_note: str) -> tuple[str, str]:
    """How to resume an operation whose last attempt (begun at `began_ms`) has no outcome, by its tier:
    ("send", "") to send it again (keyed: the same key dedups; queryable: the target says absent and the
    attempt can no longer land), ("succeeded", note) when the target reports it done, ("wait", why) when
    its "absent" proves nothing yet (ask again later), or ("unknown", why) to leave it to an operator
    (blind: never resent; a target that cannot confirm). Shared by every
    drainer, so a store's recovery and a fleet's takeover keep one set of rules."""
    if effect.delivery == "keyed":
        return "send", ""
    if effect.delivery == "blind":
        return "unknown", blind_reason_note(last_note)
    found = _safe_reconcile(impl, effect, op)
    if found == "succeeded":
        return "succeeded", f"reconciled with the target ({effect.delivery}): it reports the operation done"
    if found == "absent":
        early = _too_early(impl, effect, began_ms)
        return ("wait", early) if early else ("send", "")
    return "unknown", (
        f"the target could not confirm whether operation {op} happened ({effect.delivery} reconcile "
        "answered unknown); nothing was resent"
    )


def _too_early(impl: Adapter, effect: Effect, began_ms: int) -> str:
    """Why the target's "absent" proves nothing yet ('' once it does): the last attempt began less than the
    adapter's absence window ago, so it may still be on its way or in processing at the target."""
    window_ms = int(impl.absence_window(effect) * 1000)
    left_ms = began_ms + window_ms - now_ms()
    if left_ms <= 0:
        return ""
    return (
        f"the target has no record of the operation yet, but the last attempt began "
        f"{max(0, window_ms - left_ms) / 1000:.1f}s ago and may still land for {left_ms / 1000:.1f}s more "
        f"(absence window {window_ms / 1000:g}s); nothing was resent: `reel recover` after that asks again"
    )


def blind_reason(latest: Journal) -> str:
    return blind_reason_note(latest.note)


def blind_reason_note(note: str) -> str:
    return (
        "blind delivery: the target takes no idempotency key and cannot be asked, and the last journal entry "
        f"({note or 'intent'}) shows the request may have left; it is never resent automatically"
    )


def _safe_reconcile(impl: Adapter, effect: Effect, op: str) -> str:
    try:
        found = impl.reconcile(effect, op)
    except (OSError, ReelError):
        return "unknown"
    return found if found in ("succeeded", "absent") else "unknown"


def _unsendable(
    repo: Repo, report: DrainReport, effect: Effect, index: int, op: str, latest: Journal | None, exc: ReelError
) -> Outcome:
    """The effect's adapter cannot be loaded here: journal `not_sent` (no intent: nothing was tried)."""
    if latest is not None and latest.state == "unknown":
        return Outcome(
            index,
            op,
            effect.id,
            "unknown",
            "halted",
            f"an earlier attempt's outcome is unknown ({latest.note}), and its adapter cannot be loaded "
            f"to resume it: {exc.message}",
        )
    note = f"not sent: its adapter cannot be loaded here ({exc.message}); install or register it, then `reel recover`"
    _journal(
        repo,
        report,
        drainlog.Step(
            report.record, index, effect.id, op, "not_sent", latest.id if latest is not None else None, None, note
        ),
    )
    return Outcome(index, op, effect.id, "not_sent", "tried" if latest is None else "retried", note)


def _refused(repo: Repo, report: DrainReport, effect: Effect, index: int, op: str, found: owners.Owner) -> Outcome:
    """The operation is owned elsewhere in this store (another record, another trunk's journal, an
    abort): journal it `failed` without sending, since sending it here could make it happen twice."""
    note = (
        f"never sent: operation {op} {found.describe()}; sending it from record {report.record.hex()} too "
        "could make it happen twice"
    )
    _journal(repo, report, drainlog.Step(report.record, index, effect.id, op, "failed", None, None, note))
    return Outcome(index, op, effect.id, "failed", "refused", note)


def _send(
    repo: Repo,
    report: DrainReport,
    impl: Adapter,
    effect: Effect,
    index: int,
    op: str,
    latest: Journal | None,
    action: str,
) -> Outcome:
    attempt = 1 if latest is None else _attempts(repo, report.trunk, op) + 1
    note = f"intent: attempt {attempt} under epoch {report.epoch}; the request may have left"
    intent = _journal(
        repo,
        report,
        drainlog.Step(
            report.record, index, effect.id, op, "unknown", latest.id if latest is not None else None, None, note
        ),
    )
    assert intent is not None
    crash_point("drain:before-send")
    result = fire(repo, impl, effect, op, report.epoch)
    crash_point("drain:after-send")
    state = result.state
    note = result.note or f"{state} on attempt {attempt}"
    if state == "not_sent":
        action = "tried" if action == "sent" else "retried"
    report.deferred = drainlog.Step(
        report.record, index, effect.id, op, state, intent.id, dict(result.receipt) or None, note
    )
    return Outcome(index, op, effect.id, state, action, note)


def fire(repo: Repo, impl: Adapter, effect: Effect, op: str, epoch: int) -> Result:
    """Send `effect` once through `impl` with a fire token minted for it under `epoch`, and say what
    became of it as one of FATES: an adapter that raised or never presented its token is `not_sent`
    if the token is unused (nothing left), `unknown` if it was used (the request may have left).
    Raises StaleEpoch if a recovery fenced `epoch`."""
    token = _mint(repo, effect.id, epoch)
    try:
        result = impl.fire(effect, token, op)
    except StaleEpoch:
        raise
    except NotSent as exc:
        result = Result("not_sent", note=f"not sent: {exc}")
    except Exception as exc:  # noqa: BLE001  (an adapter's crash after its token was used is an unknown outcome)
        what = exc.message if isinstance(exc, ReelError) else repr(exc)
        result = (
            Result(
                "unknown", note=f"the adapter raised {what} after presenting its fire token; the request may have left"
            )
            if token.used
            else Result("not_sent", note=f"not sent: the adapter raised {what} before presenting its fire token")
        )
    if not token.used and result.state != "not_sent":
        result = Result(
            "not_sent",
            note="not sent: the adapter did not present its fire token" + (f" ({result.note})" if result.note else ""),
        )
    return result if result.state in FATES else Result("unknown", result.receipt, result.note)


def _attempts(repo: Repo, trunk: str, op: str) -> int:
    """How many intents this op has: walks its own entries only, newest first, via the trunk's chain."""
    count = 0
    for entry in drainlog.walk(repo, drainlog.index(repo, trunk).head):
        if entry.op == op and entry.note.startswith("intent:"):
            count += 1
    return count
