"""The contract between `reel run`'s proxy policy and the engine that speaks the protocols.

An engine accepts the command's connections (plain HTTP, CONNECT tunnels, TLS inside them), turns
each request into a `Request` and asks its `Policy` what to do: `decide` answers it on the spot
(capture, refusal) or lets it pass; a passed request's response comes back through `passed_through`;
anything that could not be intercepted is reported through `failed`. A passed answer is relayed to
the command as it arrives (streams stay streams). The engine is replaceable: a
replayer that answers reads from a recording drives the same Policy.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

BODY_LIMIT = 64 << 20
"""Largest request body an engine buffers (64 MiB); a larger request is answered 413."""
BUFFER_BUDGET = 256 << 20
"""Bytes of bodies an engine holds in memory at once, across connections (256 MiB): a request body
that would go over is answered 413; an answer over it is relayed but not kept for the Policy."""
MAX_CONNECTIONS = 128
"""Client connections an engine serves at once; one more is answered 503 and closed."""


@dataclass(frozen=True)
class Request:
    method: str
    url: str
    host: str
    port: int
    headers: list[tuple[str, str]]
    body: bytes
    http_version: str


@dataclass(frozen=True)
class Answer:
    """A response the proxy gives itself, instead of the target."""

    status: int
    body: bytes
    headers: list[tuple[str, str]] = field(default_factory=list)
    chunks: tuple[bytes, ...] = ()
    """If set, the body is sent as these pieces, one write each and no length (a replayed stream)."""


@dataclass(frozen=True)
class Timing:
    """How long a passed request took, in milliseconds from sending it: to the whole answer, and to
    its first byte of body (for a stream: the first event)."""

    total_ms: float
    first_byte_ms: float


class Engine(Protocol):
    """What `HttpProxy` drives: listen on 127.0.0.1, put every request to the Policy, stop."""

    def start(self) -> int:
        """Start listening; the port."""

    def stop(self) -> None:
        """End every connection."""


class Policy(Protocol):
    keeps_bodies: bool
    """The engine hands `passed_through` the answer's body (a recorder); otherwise it passes None."""

    def decide(self, req: Request) -> Answer | None:
        """None: pass the request to its real host; an Answer: reply with it, send nothing."""

    def passed_through(
        self, req: Request, status: int, headers: list[tuple[str, str]], body: bytes | None, timing: Timing
    ) -> None:
        """The real host answered a passed request (and the command has the whole answer). `body` is
        None unless `keeps_bodies`, or if the answer did not fit the engine's budget."""

    def failed(self, what: str, message: str) -> None:
        """Something the command did could not be intercepted (and was not sent)."""

    def reaches(self, req: Request, address: str) -> bool:
        """May the connection the engine made for passed `req`, which reached `address`, carry it? Asked
        before a byte is written to it: a name `decide` saw resolve to a public address can resolve to a
        local one by the time the engine connects (DNS rebinding)."""


EngineFactory = Callable[[Policy, Any, Path | None], Engine]
"""(policy, leaf minter, upstream CA bundle) → engine; `tls_proxy.TlsProxy` is the default."""
