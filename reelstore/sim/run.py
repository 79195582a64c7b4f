"""One seeded run: views forked, effects queued, commits and aborts under injected faults, recovery,
then a calm phase and the invariants. The real kernel verbs and the real drain run against an
in-memory store; crashes, zombies and races are injected at the code's named crash points.

Faults: a crash at any crash point (the simulated process unwinds and is gone); a request that could
not leave (`not_sent`: returned, raised as NotSent, or a local check failing before the fire token is
presented), a lost request, a lost response, a refusal or a lost status answer at the target; a torn
batch of object writes or a lost ref write; a zombie drainer that pauses while a recovery takes over
and then carries on with its stale epoch; a concurrent committer, or an abort of the very view being
committed, run in the middle of a commit.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from reelstore import crashpoints
from reelstore.backend.repo import Repo
from reelstore.drain import journal as drainlog
from reelstore.drain import ops, recovery
from reelstore.errors import ReelError, StaleEpoch
from reelstore.kernel import verbs as kernel
from reelstore.objects import Effect, Effects, Journal, Record
from reelstore.sim.world import TIERS, Rates, World, make_repo
from reelstore.wording import plural

LOCKED_POINTS = frozenset({"journal:object-written", "refs:prepared"})
"""Points reached while holding a lock (the drain's, or a ref transaction's ref locks, once prepared): a
crash may land there, a concurrent actor may not. In a real store that actor would wait for the lock;
simulated in the lock holder's own thread it could only spin until its retries ran out."""


class SimCrash(BaseException):
    """Unwinds a simulated process at a crash point, as SIGKILL would end a real one."""

    def __init__(self, point: str) -> None:
        super().__init__(point)
        self.point = point


@dataclass
class Plan:
    kind: str
    """crash | zombie | race-commit | race-abort"""
    at: int
    other: str = ""


@dataclass
class SeedResult:
    seed: int
    events: list[str] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)
    violations: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.violations

    def to_json(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "ok": self.ok,
            "violations": self.violations,
            "counts": dict(self.counts),
            "events": self.events,
        }


class Run:
    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.world = World(self.rng, Rates.calm())
        self.repo = make_repo(self.world)
        self.result = SeedResult(seed)
        self.plan: Plan | None = None
        self.hits = 0
        self.aborted: set[str] = set()
        self.done: set[str] = set()
        self.epochs: list[int] = [0]

    # the crash-point hook

    def hook(self, point: str) -> None:
        plan = self.plan
        if plan is None:
            return
        self.hits += 1
        if self.hits < plan.at:
            return
        if plan.kind == "crash":
            self.plan = None
            self.result.counts["crash"] += 1
            raise SimCrash(point)
        eligible = point not in LOCKED_POINTS and (plan.kind != "zombie" or point.startswith("drain:"))
        if not eligible:
            return
        self.plan = None
        if plan.kind == "zombie":
            self.result.counts["zombie"] += 1
            self.result.counts[f"zombie-{self.tier_in_flight()}"] += 1
            self.process(f"rescue of a paused drainer at {point}", lambda: recovery.recover(self.repo))
        elif plan.kind == "race-commit":
            self.result.counts["race-commit"] += 1
            self.done.add(plan.other)
            self.process(f"concurrent commit {plan.other} at {point}", lambda: kernel.commit(self.repo, plan.other))
        elif plan.kind == "race-abort":
            self.result.counts["race-abort"] += 1
            self.abort(self.current, f"racing abort at {point}")

    def tier_in_flight(self) -> str:
        """The tier of the effect a drainer is sending: the newest journal entry is its intent."""
        head = self.repo.refs.get(drainlog.ref_name(self.repo.trunk))
        entry = self.repo.objects.get(head) if head is not None else None
        effect = self.repo.objects.get(entry.effect) if isinstance(entry, Journal) else None
        return effect.delivery if isinstance(effect, Effect) else "?"

    def event(self, text: str) -> None:
        self.result.events.append(text)

    def process(self, what: str, fn: Callable[[], Any], faults: bool = False) -> Any:
        """Run one simulated process to its end: done, crashed, fenced or refused."""
        saved = self.world.rates
        if faults:
            self.world.rates = Rates()
        try:
            out = fn()
            self.event(f"{what}: {_summary(out)}")
            return out
        except SimCrash as crash:
            self.event(f"{what}: crashed at {crash.point}")
        except StaleEpoch:
            self.result.counts["fenced"] += 1
            self.event(f"{what}: fenced (E016)")
        except ReelError as err:
            self.result.counts[f"error-{err.code}"] += 1
            self.event(f"{what}: {err.code}")
        finally:
            self.world.rates = saved
            self.epochs.append(_epoch(self.repo))
        return None

    def abort(self, name: str, why: str) -> None:
        if self.process(f"{why}: abort {name}", lambda: kernel.abort(self.repo, name)) is not None:
            self.aborted.add(name)

    # the scenario

    def run(self) -> SeedResult:
        clock, drainlog.clock = drainlog.clock, _Ticker()
        try:
            with crashpoints.hooked(self.hook):
                self.setup()
                self.storm()
                self.calm()
                self.check()
        except SimCrash as crash:
            self.result.violations.append(f"a crash escaped the scenario at {crash.point}")
        finally:
            drainlog.clock = clock
            self.result.counts.update(self.world.counts)
        return self.result

    def setup(self) -> None:
        self.views = [f"v{i}" for i in range(self.rng.randint(1, 4))]
        for name in self.views:
            kernel.fork(self.repo, name)
            for k in range(self.rng.randint(1, 3)):
                tier = TIERS[self.rng.randrange(len(TIERS))]
                kernel.effect(self.repo, name, "sim", {"tier": tier, "id": f"{name}.{k}"})
            if self.rng.random() < 0.5:
                kernel.put(self.repo, name, f"f{self.rng.randrange(4)}", name.encode())
        self.event(f"setup: {plural(len(self.views), 'view')}")

    def storm(self) -> None:
        for name in self.views:
            if name in self.done:
                continue
            self.done.add(name)
            self.current = name
            r = self.rng.random()
            if r < 0.2:
                self.abort(name, "abort")
                continue
            others = [v for v in self.views if v not in self.done]
            self.plan = self.pick_plan(others)
            self.hits = 0
            self.process(
                f"commit {name} ({self.plan.kind if self.plan else 'clean'})",
                partial(kernel.commit, self.repo, name),
                faults=True,
            )
            self.plan = None
            if self.rng.random() < 0.5:
                self.plan = Plan("crash", self.rng.randint(1, 8)) if self.rng.random() < 0.3 else None
                self.hits = 0
                self.process("recover", lambda: recovery.recover(self.repo), faults=True)
                self.plan = None

    def pick_plan(self, others: list[str]) -> Plan | None:
        r = self.rng.random()
        if r < 0.35:
            return Plan("crash", self.rng.randint(1, 12))
        if r < 0.5:
            return Plan("zombie", self.rng.randint(1, 6))
        if r < 0.6 and others:
            return Plan("race-commit", self.rng.randint(1, 8), others[self.rng.randrange(len(others))])
        if r < 0.7:
            return Plan("race-abort", self.rng.randint(1, 8))
        return None

    def calm(self) -> None:
        """Faults off: retry what a user would retry, recover, and let an operator settle blind unknowns."""
        for name in self.views:
            if name not in self.aborted and self.repo.refs.get(f"refs/views/{name}") is not None:
                self.process(f"calm commit {name}", partial(kernel.commit, self.repo, name))
        self.process("calm recover", lambda: recovery.recover(self.repo))
        self.check_blind_at_most_once()
        for _ in range(8):
            unknown = [o for o in ops.list_ops(self.repo, unresolved=True) if o.state == "unknown"]
            if not unknown:
                break
            for o in unknown:
                if o.effect.delivery != "blind":
                    continue
                truth = "succeeded" if self.world.acted[o.op] else "absent"
                self.result.counts["operator-finding"] += 1
                self.process(
                    f"operator finds {o.effect.op['id']} {truth}",
                    partial(ops.reconcile, self.repo, o.op, truth, "sim oracle", "sim-operator"),
                )
            self.process("calm recover", lambda: recovery.recover(self.repo))

    # the invariants

    def check_blind_at_most_once(self) -> None:
        tiers = {o.op: o.effect.delivery for o in ops.operations(self.repo)}
        for op, n in self.world.acted.items():
            if n > 1 and tiers.get(op) == "blind":
                self.result.violations.append(f"blind operation {op} reached the target {n} times")

    def check(self) -> None:
        v = self.result.violations
        try:
            operations = list(ops.operations(self.repo))
        except ReelError as err:
            v.append(f"the store cannot list its operations: {err}")
            return
        committed = {str(o.effect.op["id"]) for o in operations}
        for _op, payload in self.world.payloads:
            if payload.split(".")[0] in self.aborted:
                v.append(f"I-002: effect {payload} of aborted view fired")
            if payload not in committed:
                v.append(f"effect {payload} fired but is on no committed record")
        for o in operations:
            n, tier = self.world.acted[o.op], o.effect.delivery
            if o.state == "pending":
                v.append(f"{o.effect.op['id']} ({tier}) committed but silently never drained")
            elif o.state == "unknown":
                v.append(f"{o.effect.op['id']} ({tier}) still unknown after the calm phase")
            elif o.state == "not_sent":
                v.append(f"{o.effect.op['id']} ({tier}) still not sent after the calm phase's recovery")
            elif o.state == "succeeded" and n != 1:
                v.append(f"{o.effect.op['id']} ({tier}) succeeded but reached the target {n} times")
            elif o.state in ("failed", "absent") and n != 0:
                v.append(f"{o.effect.op['id']} ({tier}) is {o.state} but reached the target {n} times")
        self.check_refs_and_chains()
        self.check_not_sent_is_true()
        if any(b < a for a, b in zip(self.epochs, self.epochs[1:])):
            v.append(f"the epoch went back: {self.epochs}")
        self.result.counts["seeds"] += 1

    def check_not_sent_is_true(self) -> None:
        """The drain journals `not_sent` only for attempts the world stopped before anything left."""
        journaled: Counter[str] = Counter()
        for trunk in ops.trunks(self.repo):
            for entry in drainlog.walk(self.repo, self.repo.refs.get(drainlog.ref_name(trunk))):
                if entry.state == "not_sent":
                    journaled[entry.op] += 1
        for op, n in journaled.items():
            if n > self.world.unsent[op]:
                self.result.violations.append(
                    f"{op} journaled not_sent {n} times, but the world stopped only "
                    f"{self.world.unsent[op]} of its attempts before they left"
                )

    def check_refs_and_chains(self) -> None:
        v, repo = self.result.violations, self.repo
        for name, h in repo.refs.list():
            if not repo.objects.has(h):
                v.append(f"ref {name} dangles")
                return
        for trunk in ops.trunks(repo):
            for _, rec in ops.trunk_records(repo, trunk):
                missing = [h for h in rec.references() if not repo.objects.has(h)]
                if missing:
                    v.append(f"a record of {trunk} references a missing object")
                if rec.effects is not None:
                    block = repo.objects.get(rec.effects)
                    if not isinstance(block, Effects) or not all(
                        isinstance(repo.objects.get(e), Effect) for e in block.items
                    ):
                        v.append("a record's effects do not decode")
            epochs: list[int] = []
            for entry in drainlog.walk(repo, repo.refs.get(drainlog.ref_name(trunk))):
                if not isinstance(entry, Journal) or not isinstance(repo.objects.get(entry.record), Record):
                    v.append("the journal chain does not verify")
                epochs.append(entry.epoch)
            epochs.reverse()
            if any(b < a for a, b in zip(epochs, epochs[1:])):
                v.append(f"a fenced drainer wrote to the journal (epochs {epochs})")


class _Ticker:
    """A deterministic clock for journal entries."""

    def __init__(self) -> None:
        self.now = 1_700_000_000_000

    def __call__(self) -> int:
        self.now += 1
        return self.now


def _epoch(repo: Repo) -> int:
    from reelstore.drain import epoch

    return epoch.current(repo)


def _summary(out: Any) -> str:
    drains = getattr(out, "drains", None)
    if drains is not None:
        return "; ".join(",".join(o.state for o in d.outcomes) for d in drains) or "nothing to do"
    drain = getattr(out, "drain", None)
    if drain is not None:
        return "drained " + ",".join(o.state for o in drain.outcomes)
    return "ok"


def run_seed(seed: int) -> SeedResult:
    return Run(seed).run()
