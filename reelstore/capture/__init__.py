"""In-process capture: what `reel run`'s proxy decides about one outbound request, without a proxy.

A read-like request (a safe method, or one a `read` service rule covers, such as a model's chat
completion) passes through to the real host. Any other request is admitted into a view as an `http`
effect and answered `202 Accepted` with the document `pending` builds, the one the proxy answers with
too, so a program cannot tell the two captures apart. A request the view refuses is answered 400 or
403 with the error's code (`refused`).

The clients live in `reelstore.capture.httpx_client` (httpx, which the `openai` and `anthropic` SDKs
take as `http_client=`) and `reelstore.capture.requests_adapter` (a `requests` transport adapter).
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from typing import TYPE_CHECKING, Any

from reelstore.backend.service_rules import SAFE_METHODS, classify
from reelstore.errors import BadInput, ReelError

if TYPE_CHECKING:
    from reelstore.backend.config import Config
    from reelstore.objects import Effect

HOP_BY_HOP = frozenset(
    (
        "connection",
        "keep-alive",
        "proxy-connection",
        "proxy-authorization",
        "proxy-authenticate",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
    )
)
"""Headers that belong to one connection, not to the request: never stored in an effect."""


def passes(config: Config, method: str, url: str) -> bool:
    """True if the request changes nothing and goes out at once: a safe method or a read rule's match."""
    method = method.upper()
    return method in SAFE_METHODS or classify(config, f"http:{method}:{url}", method).read_like


def http_op(method: str, url: str, headers: dict[str, str], body: bytes) -> dict[str, Any]:
    """The http adapter's operation for a captured request (a body that is not UTF-8 stays bytes)."""
    op: dict[str, Any] = {"method": method.upper(), "url": url, "headers": headers}
    if body:
        try:
            op["body"] = body.decode("utf-8")
        except UnicodeDecodeError:
            op["body"] = body
    return op


def end_to_end(pairs: list[tuple[str, str]]) -> dict[str, str]:
    """The request's end-to-end headers, repeated ones joined as HTTP joins them."""
    headers: dict[str, str] = {}
    for k, v in pairs:
        if k.lower() in HOP_BY_HOP or k.startswith(":"):
            continue
        sep = "; " if k.lower() == "cookie" else ", "
        headers[k] = f"{headers[k]}{sep}{v}" if k in headers else v
    return headers


def pending(view: str, made: Effect) -> dict[str, Any]:
    """The body of the 202 a captured request is answered with (its `Reel-Effect` header is `made.id`)."""
    return {
        "reel": "pending",
        "view": view,
        "effect": made.id.hex(),
        "class": made.effect_class,
        "delivery": made.delivery,
        "resource": made.resource,
        "note": "captured; it is sent only if the view is committed",
    }


def refused(view: str, err: ReelError) -> tuple[int, dict[str, Any]]:
    """The status and body a request the view refused is answered with: 400 for bad input, else 403."""
    return 400 if isinstance(err, BadInput) else 403, {"reel": "refused", "view": view, "error": err.to_json()}


_serial: weakref.WeakKeyDictionary[object, threading.RLock] = weakref.WeakKeyDictionary()
_serial_async: weakref.WeakKeyDictionary[object, asyncio.Lock] = weakref.WeakKeyDictionary()
_guard = threading.Lock()


def serial(handle: object) -> threading.RLock:
    """The lock every in-process writer through `handle` takes: an agent's tools run in threads, and two
    writes to one view at once would race on its ref (one of them would fail with E002)."""
    with _guard:
        lock = _serial.get(handle)
        if lock is None:
            lock = _serial[handle] = threading.RLock()
        return lock


def serial_async(handle: object) -> asyncio.Lock:
    """`serial` for a coroutine handle: concurrent tool calls on one event loop land one after another."""
    with _guard:
        lock = _serial_async.get(handle)
        if lock is None:
            lock = _serial_async[handle] = asyncio.Lock()
        return lock
