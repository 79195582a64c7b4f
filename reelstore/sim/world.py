"""The simulated outside world: targets of every delivery tier, their oracle, and faulty storage.

Everything is driven by one seeded `random.Random`, so a seed replays exactly. The target's oracle
(`acted`) is what the invariants judge; the store never reads it. Storage faults model what atomic
writes still allow: a write that does not happen (the object or ref is simply not there), or a batch
of objects of which only a prefix landed; never a half-written object or ref.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from reelstore.adapters.base import Adapter, Admission, NotSent, Result, register
from reelstore.backend.object_store import MemoryObjectStore
from reelstore.backend.refdb.refs import MemoryRefStore, RefUpdate
from reelstore.backend.repo import Repo
from reelstore.backend.state_files import MemoryFiles
from reelstore.errors import BadInput, StorageError
from reelstore.objects import Hash, Object

if TYPE_CHECKING:
    from reelstore.objects import Effect

TIERS = ("keyed", "queryable", "two-phase", "blind")


@dataclass
class Rates:
    """Per-call fault probabilities; a calm phase sets them all to zero."""

    lost_request: float = 0.05
    lost_response: float = 0.08
    refuse: float = 0.03
    status_lost: float = 0.05
    object_write: float = 0.01
    ref_write: float = 0.01
    unsent: float = 0.04
    """The request could not leave (no connection, a local check, a missing secret): `not_sent`."""

    @classmethod
    def calm(cls) -> Rates:
        return cls(0, 0, 0, 0, 0, 0, 0)


@dataclass
class World:
    rng: random.Random
    rates: Rates = field(default_factory=Rates)
    acted: Counter[str] = field(default_factory=Counter)
    """op id -> how many times the target acted on it (the oracle)."""
    payloads: list[tuple[str, str]] = field(default_factory=list)
    """(op id, payload id) for every act, in order."""
    keyed: set[str] = field(default_factory=set)
    counts: Counter[str] = field(default_factory=Counter)
    """Faults injected and fences hit, by kind."""
    unsent: Counter[str] = field(default_factory=Counter)
    """op id -> how many attempts the world stopped before anything left (the drain may journal no more)."""

    def chance(self, p: float) -> bool:
        return p > 0 and self.rng.random() < p

    def local_refusal(self, op_id: str) -> bool:
        """A check before the fire token is presented fails (the adapter raises; nothing left)."""
        if self.chance(self.rates.unsent / 4):
            self.counts["not-sent-local"] += 1
            self.unsent[op_id] += 1
            return True
        return False

    def deliver(self, tier: str, op_id: str, payload: str) -> Result:
        if self.chance(self.rates.unsent):
            self.unsent[op_id] += 1
            if self.rng.random() < 0.5:
                self.counts["not-sent-raised"] += 1
                raise NotSent("simulated: the connection could not be made")
            self.counts["not-sent"] += 1
            return Result("not_sent", note="simulated: the name did not resolve")
        if self.chance(self.rates.lost_request):
            self.counts["lost-request"] += 1
            return Result("unknown", note="the request was lost on the way")
        if tier in ("keyed", "two-phase") and op_id in self.keyed:
            return Result("succeeded", {"dedup": True}, "the target recognised the key")
        if self.chance(self.rates.refuse):
            self.counts["refused"] += 1
            return Result("failed", note="the target refused")
        self.acted[op_id] += 1
        self.payloads.append((op_id, payload))
        if tier in ("keyed", "two-phase"):
            self.keyed.add(op_id)
        if self.chance(self.rates.lost_response):
            self.counts["lost-response"] += 1
            return Result("unknown", note="the answer was lost on the way back")
        return Result("succeeded", {"acted": True}, "done")

    def status(self, op_id: str) -> str:
        if self.chance(self.rates.status_lost):
            self.counts["status-lost"] += 1
            return "unknown"
        return "succeeded" if self.acted[op_id] else "absent"

    def storage_fault(self, what: str) -> None:
        rate = self.rates.object_write if what == "object" else self.rates.ref_write
        if self.chance(rate):
            self.counts[f"{what}-write-lost"] += 1
            raise StorageError(f"simulated {what} write fault")


def _no_world(repo: Repo) -> World:
    raise BadInput("the sim adapter only works in a simulated store")


def attach(repo: Repo, world: World) -> None:
    """Make `world` the simulated targets of `repo`'s sim adapter."""
    repo.attach(_no_world, world)


def world_of(repo: Repo) -> World:
    return repo.attached(_no_world)


@register
class SimAdapter(Adapter):
    """`{"tier": TIER, "id": PAYLOAD}` delivered to the simulated target of that tier."""

    name = "sim"

    def classify(self, op: Mapping[str, Any]) -> Admission:
        tier, payload = op.get("tier"), op.get("id")
        if tier not in TIERS or not isinstance(payload, str):
            raise BadInput("sim op needs a tier and a string id")
        return Admission(f"sim:{tier}:{payload}", "C", tier)

    def fire(self, effect: Effect, token: Any, op_id: str) -> Result:
        world = world_of(self.repo)
        if world.local_refusal(op_id):
            raise BadInput("simulated local precondition failed")
        token.consume(effect.id)
        return world.deliver(effect.delivery, op_id, str(effect.op["id"]))

    def reconcile(self, effect: Effect, op_id: str) -> str:
        if effect.delivery not in ("queryable", "two-phase"):
            return "unknown"
        return world_of(self.repo).status(op_id)


class SimObjects(MemoryObjectStore):
    """A memory object store whose batch writes may land only in part, or not at all.

    Decoded objects are cached by id (they are immutable), which keeps thousands of seeds fast.
    """

    world: World | None = None

    def __init__(self) -> None:
        super().__init__()
        self._decoded: dict[Hash, Object] = {}

    def get(self, h: Hash) -> Object:
        obj = self._decoded.get(h)
        if obj is None:
            obj = self._decoded[h] = super().get(h)
        return obj

    def delete(self, h: Hash) -> None:
        self._decoded.pop(h, None)
        super().delete(h)

    def _store(self, items: list[tuple[Hash, bytes]]) -> None:
        if self.world is not None and self.world.rates.object_write:
            cut = self.world.rng.randrange(len(items) + 1) if self.world.chance(self.world.rates.object_write) else -1
            if cut >= 0:
                super()._store(items[:cut])
                self.world.counts["object-write-torn"] += 1
                raise StorageError("simulated torn batch of object writes")
        super()._store(items)


class SimRefs(MemoryRefStore):
    """A memory ref store whose writes may not happen."""

    world: World | None = None

    def _apply(self, updates: list[RefUpdate], message: str, principal: str, held: set[str]) -> None:
        if self.world is not None:
            self.world.storage_fault("ref")
        super()._apply(updates, message, principal, held)


def make_repo(world: World) -> Repo:
    base = Repo.memory()
    objects, refs = SimObjects(), SimRefs()
    repo = Repo(MemoryFiles(), objects, refs, base.config)
    repo.start_trunk(repo.trunk)
    objects.world, refs.world = world, world
    attach(repo, world)
    return repo
