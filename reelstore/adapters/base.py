"""The adapter contract: how an effect is classified at admission and delivered at drain.

An adapter never decides *whether* an effect fires; the drain does. The adapter classifies an
operation (resource name, class, delivery tier), re-checks a Class B precondition at commit, sends
the effect when handed a fire token by the drain, and, where its target allows, reconciles an
operation whose outcome the journal could not establish.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from reelstore.errors import NotFound

if TYPE_CHECKING:
    from reelstore.objects import Effect
    from reelstore.storage.repo import Repo


@dataclass(frozen=True)
class Admission:
    """What an adapter decides about an operation before it is queued."""

    resource: str
    """The name capabilities are checked against, e.g. `http:POST:http://h/pay` or `fs:out/a.txt`."""
    effect_class: str
    """"B" (protected: precondition re-checked at commit) or "C" (irreversible)."""
    delivery: str
    """keyed | two-phase | queryable | blind."""
    version_ref: Mapping[str, Any] | None = None


FATES = ("not_sent", "failed", "unknown", "succeeded")
"""An attempt's four fates, decided by evidence, never guessed:

- `not_sent`: provably no byte of the request left the process (name resolution, connect or the TLS
  handshake failed, a local precondition or a secret was missing). Safe to send again, whatever the tier.
- `failed`: the target answered with a definite refusal. Final.
- `succeeded`: the target answered that it acted; `receipt` says how. Final.
- `unknown`: the request was sent, or may have been, and no definite answer came back.
"""


class NotSent(Exception):  # noqa: N818  (a fate, named as the journal names it)
    """Raised by an adapter's `fire` when it can prove nothing of the request left the process (a
    missing secret, a failed local check, a connection that could not be made). The drain journals
    the effect `not_sent`, and `reel recover` may send it again. An adapter that cannot prove this
    must not raise it: any other exception after the fire token was consumed is `unknown`."""


@dataclass(frozen=True)
class Result:
    """One delivery attempt's outcome: `state` is one of FATES."""

    state: str
    receipt: Mapping[str, Any] = field(default_factory=dict)
    note: str = ""


class Adapter:
    """Base class. Subclasses set `name` and implement `classify` and `fire`."""

    name: ClassVar[str] = ""

    def __init__(self, repo: Repo) -> None:
        self.repo = repo

    def classify(self, op: Mapping[str, Any]) -> Admission:
        """Validate `op` (E014 if malformed) and say how it is named, classed and delivered."""
        raise NotImplementedError

    def check_precondition(self, effect: Effect) -> None:
        """Class B only, at commit: raise Conflict (E002) if the version ref no longer holds."""

    def fire(self, effect: Effect, token: Any, op_id: str) -> Result:
        """Deliver `effect`. Must call `token.consume(effect.id)` before any outside action;
        `op_id` is the idempotency key for targets that take one. Returns a Result of one of FATES,
        or raises NotSent when it can prove nothing left."""
        raise NotImplementedError

    def reconcile(self, effect: Effect, op_id: str) -> str:
        """After a crash: did the target act? `succeeded`, `absent` or `unknown` (the default)."""
        return "unknown"


REGISTRY: dict[str, type[Adapter]] = {}


def register(cls: type[Adapter]) -> type[Adapter]:
    REGISTRY[cls.name] = cls
    return cls


def adapter(name: str, repo: Repo) -> Adapter:
    """An adapter instance by name (E001 if no adapter has that name)."""
    if name not in REGISTRY:
        from reelstore.adapters import fs, http  # noqa: F401  (importing registers the shipped adapters)
    try:
        return REGISTRY[name](repo)
    except KeyError:
        raise NotFound(f"no adapter named {name!r}; known: {', '.join(sorted(REGISTRY))}") from None
