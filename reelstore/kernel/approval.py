"""Approvals: effects a service rule marks `approval = required` fire only after principals other than
the view's initiator (and other than whoever queued them) approved exactly those effects.

An approval is an object bound to the view's pending-effects object and namespace root (see
`objects.approval`); the view lists it, so it travels with the view on push and fetch. The commit verb
asks `require` before anything changes: without enough current approvals it refuses (E018) naming
who must approve what, runs the `notify` hook (at most `ops.maxNotices` times per view state and
recipient), and nothing is committed or sent. Waiting holds nothing but the view itself; whoever may
commit can commit once the approvals are there, and the commit drains as any other. The committed
view keeps exactly the approvals that let its effects fire, so a record can always say who approved.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from reelstore.attribution import now_ms
from reelstore.backend.repo import Repo
from reelstore.backend.service_rules import rule_for
from reelstore.errors import ApprovalRequired, BadInput, CapabilityViolation, Conflict, NotFound
from reelstore.hooks.runner import hook_path, run_hook, run_pre_hook
from reelstore.kernel.changes import pending_effects
from reelstore.kernel.transaction import CAS_ATTEMPTS, backoff, give_up
from reelstore.kernel.views import Live, fork_id, initiator, live_views, load_live
from reelstore.objects import Approval, Effect, Hash, Object, View
from reelstore.objects.ref import VIEW_PREFIX
from reelstore.objects.view import MAX_APPROVALS
from reelstore.wording import plural

_REFLOG_LOOKBACK = 256


def established(repo: Repo) -> str:
    """How `repo.principal()` was established: the environment, the store's config, or the login name.
    None of them is proof of identity; a hook can demand more."""
    if os.environ.get("REEL_PRINCIPAL"):
        return "REEL_PRINCIPAL"
    if repo.config.get("user.name"):
        return "user.name"
    return "login"


@dataclass(frozen=True)
class Need:
    """What one approval rule asks of a view: `count` distinct approvers (from `group`, if set) for the
    pending effects it covers, and who has approved so far."""

    service: str
    count: int
    group: str
    effects: tuple[int, ...]
    """Indices of the pending effects the rule covers."""
    have: tuple[str, ...] = ()

    @property
    def met(self) -> bool:
        return len(self.have) >= self.count

    def describe(self) -> str:
        who = f"from group {self.group}" if self.group else "other than the initiator"
        so_far = f"approved so far by {', '.join(self.have)}" if self.have else "no approval yet"
        return (
            f"rule {self.service} ({plural(len(self.effects), 'effect')}) needs "
            f"{plural(self.count, 'approver')} {who}: {so_far}"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "service": self.service,
            "count": self.count,
            "group": self.group or None,
            "effects": list(self.effects),
            "approved_by": list(self.have),
            "met": self.met,
        }


@dataclass(frozen=True)
class Standing:
    """Where a view stands: the rules that need approval, and its approvals sorted by what they count for."""

    view: str
    initiator: str
    effects: Hash | None
    namespace: Hash
    needs: tuple[Need, ...]
    current: tuple[Approval, ...]
    """Approvals of exactly this state by principals allowed to approve it."""
    stale: tuple[Approval, ...]
    """Approvals (and refusals) of an earlier state of the view: they count for nothing."""
    rejected: tuple[Approval, ...]
    """Refusals of exactly this state: the commit waits until the view changes and is approved again."""
    barred: tuple[Approval, ...]
    """Approvals by the initiator or a principal who queued an effect: they count for nothing."""
    since: int = 0
    """When the view reached this state (ms since the epoch)."""

    @property
    def waiting(self) -> bool:
        return bool(self.rejected) or not all(n.met for n in self.needs)

    @property
    def stale_approvers(self) -> list[str]:
        """Who approved an earlier state of the view and not this one."""
        return sorted({a.by for a in self.stale if a.verdict == "approve"} - {a.by for a in self.current})

    def explain(self) -> str:
        parts = [f"view {self.view!r} needs approval before its effects fire (initiator {self.initiator})"]
        parts += [n.describe() for n in self.needs if not n.met]
        parts += [f"refused by {a.by}" + (f" ({a.note})" if a.note else "") for a in self.rejected]
        parts += [
            f"the approval by {by} is stale: the view changed after it (its pending effects or names differ "
            "from what was approved)"
            for by in self.stale_approvers
        ]
        parts += [
            f"the approval by {by} does not count: it names the initiator or a principal who queued an effect"
            for by in sorted({a.by for a in self.barred})
        ]
        return "; ".join(parts) + (
            f". Nothing was committed or sent; `reel approve {self.view} --by NAME`, then commit again"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "view": self.view,
            "initiator": self.initiator,
            "effects": self.effects.hex() if self.effects else None,
            "namespace": self.namespace.hex(),
            "waiting": self.waiting,
            "since": self.since or None,
            "needs": [n.to_json() for n in self.needs],
            "approvals": [describe(a) for a in self.current],
            "stale": [describe(a) for a in self.stale],
            "rejected": [describe(a) for a in self.rejected],
            "barred": [describe(a) for a in self.barred],
        }


def describe(a: Approval) -> dict[str, Any]:
    """An approval as `--json` shows it."""
    return {
        "id": a.id.hex(),
        "verdict": a.verdict,
        "by": a.by,
        "principal": a.principal,
        "via": a.via,
        "time": a.time,
        "note": a.note,
        "view": a.view,
        "effects": a.effects.hex() if a.effects else None,
        "namespace": a.namespace.hex(),
    }


def _needs(repo: Repo, effects: Sequence[Effect]) -> list[tuple[str, int, str, list[int]]]:
    """(rule, count, group, effect indices) of every rule in force that requires approval here."""
    found: dict[str, tuple[str, int, str, list[int]]] = {}
    for i, e in enumerate(effects):
        rule = rule_for(repo.config, e.resource)
        if rule is not None and rule.approvals:
            found.setdefault(rule.name, (rule.name, rule.approvals, rule.approvers, []))[3].append(i)
    return list(found.values())


def members(repo: Repo, group: str) -> set[str]:
    """The principals in `group` (config `group.NAME.member`, one or more values, comma-separated)."""
    return {m.strip() for v in repo.config.get_all(f"group.{group}.member") for m in v.split(",") if m.strip()}


def barred(repo: Repo, view: View, effects: Sequence[Effect]) -> set[str]:
    """Who may not approve the view: its initiator and every principal that queued one of its effects."""
    return {initiator(repo, view), *(e.principal for e in effects if e.principal)}


def _fetched_copies(repo: Repo, live: Live) -> list[View]:
    """The copies of view `live` (same lineage, another object) that fetches brought from remotes."""
    fork = fork_id(live.view)
    out = []
    for ref, h in repo.refs.list("refs/remotes/"):
        if not ref.endswith(f"/views/{live.name}") or h == live.id:
            continue
        other = repo.cache.load(h, Object)
        if isinstance(other, View) and fork_id(other) == fork:
            out.append(other)
    return out


def gathered(repo: Repo, live: Live) -> list[Approval]:
    """The view's approvals, and those of its copies fetched from remotes: an approver on another
    machine signs there and pushes; a fetch brings the signed copy back beside this one."""
    ids = list(live.view.approvals)
    for other in _fetched_copies(repo, live):
        ids.extend(a for a in other.approvals if a not in ids)
    return [repo.cache.load(h, Approval) for h in ids]


def standing(repo: Repo, live: Live, effects: Sequence[Effect] | None = None) -> Standing:
    """What the approval rules ask of view `live` and how its approvals answer."""
    view = live.view
    effects = pending_effects(repo, view) if effects is None else effects
    fork = fork_id(view)
    no = barred(repo, view, effects)
    current: list[Approval] = []
    stale: list[Approval] = []
    rejected: list[Approval] = []
    bad: list[Approval] = []
    for a in gathered(repo, live):
        if a.fork != fork:
            continue
        if not a.binds(fork, view.effects, view.namespace):
            stale.append(a)
        elif a.by in no or a.principal in no:
            bad.append(a)
        else:
            (rejected if a.verdict == "reject" else current).append(a)
    needs = []
    for service, count, group, idx in _needs(repo, effects):
        allowed = members(repo, group) if group else None
        if allowed is not None and not allowed:
            raise BadInput(
                f"service rule {service} takes approvers from group {group}, which has no members "
                f"(config group.{group}.member)",
                service=service,
                group=group,
            )
        have = sorted({a.by for a in current if allowed is None or a.by in allowed})
        needs.append(Need(service, count, group, tuple(idx), tuple(have)))
    return Standing(
        live.name,
        initiator(repo, view),
        view.effects,
        view.namespace,
        tuple(needs),
        tuple(current),
        tuple(stale),
        tuple(rejected),
        tuple(bad),
        _since(repo, live),
    )


def _since(repo: Repo, live: Live) -> int:
    """When the view's ref first held its current effects and names (the last change), from its reflog."""
    since = int(live.view.meta.get("created", 0) or 0)
    try:
        entries = repo.refs.reflog(live.ref)[-_REFLOG_LOOKBACK:]
    except (NotImplementedError, NotFound):
        return since
    for entry in reversed(entries):
        if entry.new is None:
            break
        v = repo.cache.load(entry.new, View)
        if (v.effects, v.namespace) != (live.view.effects, live.view.namespace):
            break
        since = entry.time_ms
    return since


def require(repo: Repo, live: Live, effects: Sequence[Effect]) -> Live:
    """E018 (nothing changed, the `notify` hook told) unless every approval rule covering the view's
    effects is met and nobody refused; else the view to commit, listing exactly its current approvals."""
    if not live.view.approvals and not _needs(repo, effects):
        return live  # the common case: no rule asks, and the view lists no approval to carry
    st = standing(repo, live, effects)
    if st.waiting:
        _notify(repo, live, st)
        raise ApprovalRequired(
            st.explain(),
            view=live.name,
            needs=[n.to_json() for n in st.needs if not n.met],
            stale=st.stale_approvers,
            rejected=[a.by for a in st.rejected],
        )
    keep = tuple(a.id for a in st.current)
    if keep == live.view.approvals:
        return live
    view = replace(live.view, approvals=keep)
    repo.cache.save([view])
    return Live(live.name, view)


def _notify(repo: Repo, live: Live, st: Standing) -> None:
    """Run the `notify` hook for a view that waits, at most `ops.maxNotices` times per view state and
    recipient, and remember each run (`.reel/approvals/FORK`)."""
    if hook_path(repo, "notify") is None:
        return
    from reelstore.drain.operator import max_notices  # only with a notify hook: it loads the operator's tools

    to = ",".join(sorted({n.group for n in st.needs if n.group})) or "approvers"
    key = f"{st.effects.hex() if st.effects else '-'} {st.namespace.hex()} {to}"
    name = f"approvals/{fork_id(live.view)}"
    sent = (repo.files.read(name) or b"").decode("utf-8", "replace").splitlines()
    if sum(1 for line in sent if line.startswith(key + " ")) >= max_notices(repo):
        return
    outcome = run_hook(
        repo,
        "notify",
        {
            "REEL_NOTICE": "approval",
            "REEL_VIEW": live.name,
            "REEL_TO": to,
            "REEL_INITIATOR": st.initiator,
            "REEL_EFFECTS": st.effects.hex() if st.effects else "",
            "REEL_NEED": st.explain(),
        },
    )
    result = "delivered" if outcome is not None and outcome[0] == 0 else "not-delivered"
    repo.files.append(name, f"{key} {now_ms()} {result}\n".encode())


def _record(repo: Repo, name: str, verdict: str, by: str, note: str, expect: Hash | None) -> Approval:
    """Add an approval (or refusal) of view `name` as it is now, by compare-and-swap of its ref. It is
    bound to the state first read: if the effects or names change before it lands, E002 (review again)."""
    by = " ".join(by.split())
    if not by:
        raise BadInput(f"`{verdict}` needs --by NAME: who approves or refuses")
    first = load_live(repo, name)
    if expect is not None and first.view.effects != expect:
        raise Conflict(
            f"view {name!r} holds pending effects {first.view.effects.hex() if first.view.effects else '-'}"
            f", not {expect.hex()}: review it again",
            view=name,
        )
    effects = pending_effects(repo, first.view)
    no = barred(repo, first.view, effects)
    me = repo.principal()
    for who in dict.fromkeys((by, me)):
        if who in no:
            raise CapabilityViolation(
                f"{who} may not {verdict} view {name!r}: the view's initiator and whoever queued "
                f"its effects ({', '.join(sorted(no))}) cannot sign off on them",
                view=name,
                principal=who,
            )
    approval = Approval(
        verdict=verdict,
        view=name,
        fork=fork_id(first.view),
        effects=first.view.effects,
        namespace=first.view.namespace,
        by=by,
        principal=me,
        via=established(repo),
        time=now_ms(),
        note=note,
    )
    run_pre_hook(
        repo,
        "pre-approve",
        {
            "REEL_VIEW": name,
            "REEL_VERDICT": verdict,
            "REEL_BY": by,
            "REEL_PRINCIPAL_NAME": me,
            "REEL_VIA": approval.via,
            "REEL_EFFECTS": approval.effects.hex() if approval.effects else "",
            "REEL_NAMESPACE": approval.namespace.hex(),
            "REEL_NOTE": note,
        },
    )
    for attempt in range(CAS_ATTEMPTS):
        live = load_live(repo, name, settle=False) if attempt else first
        if not approval.binds(fork_id(live.view), live.view.effects, live.view.namespace):
            raise Conflict(
                f"view {name!r} changed while it was being {verdict}d; nothing was recorded: review it again", view=name
            )
        if len(live.view.approvals) >= MAX_APPROVALS:
            raise BadInput(f"view {name!r} already holds {MAX_APPROVALS} approvals; fork a fresh view", view=name)
        view = replace(live.view, approvals=(*live.view.approvals, approval.id))
        repo.cache.save([approval, view])
        tx = repo.refs.transaction(f"{verdict} {name}", me).update(live.ref, view.id, live.id)
        try:
            tx.commit()
            return approval
        except Conflict as exc:
            if give_up(exc, attempt):
                raise
            backoff(attempt)
    raise Conflict(f"view {name!r} kept changing; {verdict} gave up after {CAS_ATTEMPTS} attempts", view=name)


def approve(repo: Repo, name: str, by: str, note: str = "", expect: Hash | None = None) -> Approval:
    """Record `by`'s approval of view `name`'s pending effects and names exactly as they are now (E009
    if `by`, or this store's principal, is the initiator or queued one of its effects). `expect`, if
    given, is the pending-effects id the approver reviewed: E002 if the view holds another."""
    return _record(repo, name, "approve", by, note, expect)


def reject(repo: Repo, name: str, by: str, note: str = "", expect: Hash | None = None) -> Approval:
    """Record `by`'s refusal of view `name` as it is now: its commit waits until the view changes and
    is approved again."""
    return _record(repo, name, "reject", by, note, expect)


def awaiting(repo: Repo) -> list[Standing]:
    """Every live view whose effects wait for approval (or were refused), by name."""
    out = []
    for live in live_views(repo):
        if live.view.boundary == "isolated" and live.view.parent.startswith(VIEW_PREFIX):
            continue  # its effects fire only with its parent's commit, which is asked then
        st = standing(repo, live)
        if st.waiting:
            out.append(st)
    return out


def carried(repo: Repo, view: View) -> list[Approval]:
    """The approvals a (committed) view lists."""
    return [repo.cache.load(h, Approval) for h in view.approvals]
