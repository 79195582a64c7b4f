"""The adapter contract: how an effect is classified at admission and delivered at drain.

An adapter never decides *whether* an effect fires; the drain does. The adapter classifies an
operation (resource name, class, delivery tier), re-checks a Class B precondition at commit, sends
the effect when handed a fire token by the drain, and, where its target allows, reconciles an
operation whose outcome the journal could not establish.

Adapters are plugins: registered in-process with `register()`, or installed by a distribution under
the entry-point group `reelstore.adapters`, which is how the `reel` command line finds them. `fs` and
`http` ship in this package and are found the same way (setup.cfg declares them), so this contract
never imports its implementations. An effect whose adapter cannot be loaded is refused at admission and
at commit (E014), so nothing is committed that this store cannot deliver.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from reelstore.errors import BadInput

if TYPE_CHECKING:
    import importlib.metadata

    from reelstore.backend.repo import Repo
    from reelstore.objects import Effect


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

    def absence_window(self, effect: Effect) -> float:
        """Seconds after an attempt began during which the target's "absent" answer to `reconcile` is no
        proof (the attempt may still land); recovery resends only after it. Default 0: no such window."""
        return 0.0

    def absence_unprovable(self, effect: Effect) -> str:
        """The adapter's evidence rule: '' if an operator who finds no trace of `effect` at its target
        may record it absent, else why "no record found" proves nothing (the target can still act
        late). `reel reconcile --outcome absent` is refused for such an effect."""
        return ""


ENTRY_POINTS = "reelstore.adapters"
"""The entry-point group an installed distribution declares its adapters in (`name = module:Class`),
so the `reel` command line finds the same adapters as a Python program that registered them."""

REGISTRY: dict[str, type[Adapter]] = {}


def known_keys(op: Mapping[str, Any], allowed: Sequence[str], adapter: str) -> None:
    """E014 naming the first key of `op` that `allowed` lacks: a misspelt key is refused, never ignored
    (an http op's `jsn` would otherwise be sent with no body and reported a success)."""
    if not isinstance(op, Mapping):
        raise BadInput(f"{adapter} op must be a map with {' and '.join(allowed[:2])}")
    unknown = sorted(str(k) for k in op if k not in allowed)
    if unknown:
        also = f" (and {', '.join(map(repr, unknown[1:]))})" if unknown[1:] else ""
        raise BadInput(
            f"{adapter} op: unknown key {unknown[0]!r}{also}; an {adapter} op takes only {', '.join(allowed)}",
            field=f"op.{unknown[0]}",
        )


def register(cls: type[Adapter]) -> type[Adapter]:
    """Make `cls` the adapter named `cls.name` in this process (usable as a class decorator). The
    command line, another process, sees it only if it is also installed under ENTRY_POINTS."""
    if not (isinstance(cls, type) and issubclass(cls, Adapter)) or not cls.name:
        raise BadInput(f"{cls!r} is not an Adapter subclass with a name")
    REGISTRY[cls.name] = cls
    return cls


def _installed() -> dict[str, importlib.metadata.EntryPoint]:
    """Installed adapters' entry points (importlib.metadata is loaded here: it costs a verb that never
    looks an adapter up, such as fork, several milliseconds at start-up)."""
    import importlib.metadata

    return {ep.name: ep for ep in importlib.metadata.entry_points(group=ENTRY_POINTS)}


SHIPPED = ("fs", "http")
"""The adapters that come with reelstore (also declared as entry points), module
`reelstore.adapters.NAME` each."""


def _shipped(name: str) -> type[Adapter] | None:
    """A shipped adapter, by importing its own module alone: reading the installed entry points loads
    importlib.metadata and email, which a commit of fs effects needs no more than the http adapter's
    urllib3 and http.client."""
    if name not in SHIPPED:
        return None
    import importlib

    importlib.import_module(f"reelstore.adapters.{name}")  # registers it
    return REGISTRY.get(name)


def known() -> list[str]:
    """Every adapter name this process can load: registered, or installed (the shipped ones too)."""
    return sorted(set(REGISTRY) | set(_installed()))


def adapter_class(name: str) -> type[Adapter]:
    """The adapter class named `name`: registered in this process, shipped, or installed as an entry
    point. E014 if there is none or it cannot be loaded, so a caller refuses before anything changes."""
    cls = REGISTRY.get(name) or _shipped(name)
    if cls is not None:
        return cls
    point = _installed().get(name)
    if point is None:
        raise BadInput(
            f"no adapter named {name!r} can be loaded here: none is registered in this process and no "
            f"installed distribution declares one in the entry-point group {ENTRY_POINTS!r}; "
            f"known: {', '.join(known())}",
            adapter=name,
        )
    try:
        loaded = point.load()
    except Exception as exc:  # noqa: BLE001  (any import failure of a plugin means it cannot be used)
        raise BadInput(
            f"adapter {name!r} (entry point {point.value}) cannot be loaded: {exc!r}", adapter=name
        ) from None
    if not (isinstance(loaded, type) and issubclass(loaded, Adapter)):
        raise BadInput(f"adapter {name!r} (entry point {point.value}) is not an Adapter subclass", adapter=name)
    REGISTRY[name] = loaded
    return loaded


def adapter(name: str, repo: Repo) -> Adapter:
    """An adapter instance by name (E014 if it cannot be loaded: see `adapter_class`)."""
    return adapter_class(name)(repo)
