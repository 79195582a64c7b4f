"""The contract between `reel run`'s proxy policy and the engine that speaks the protocols.

An engine accepts the command's connections (plain HTTP, CONNECT tunnels, TLS inside them), turns
each request into a `Request` and asks its `Policy` what to do: `decide` answers it on the spot
(capture, refusal) or lets it pass; a passed request's response comes back through `passed_through`;
anything that could not be intercepted is reported through `failed`. The engine is replaceable: a
replayer that answers reads from a recording drives the same Policy.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

BODY_LIMIT = 64 << 20
"""Largest request or response body an engine buffers (64 MiB); a larger request is answered 413."""


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


class Engine(Protocol):
    """What `HttpProxy` drives: listen on 127.0.0.1, put every request to the Policy, stop."""

    def start(self) -> int:
        """Start listening; the port."""

    def stop(self) -> None:
        """End every connection."""


class Policy(Protocol):
    def decide(self, req: Request) -> Answer | None:
        """None: pass the request to its real host; an Answer: reply with it, send nothing."""

    def passed_through(self, req: Request, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
        """The real host answered a passed request."""

    def failed(self, what: str, message: str) -> None:
        """Something the command did could not be intercepted (and was not sent)."""


EngineFactory = Callable[[Policy, Any, Path | None], Engine]
"""(policy, leaf minter, upstream CA bundle) → engine; `tls_proxy.TlsProxy` is the default."""
