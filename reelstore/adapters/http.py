"""The http adapter: any method and URL, a JSON or bytes body, headers; delivered per service rule.

An operation is a map: `{"method": "POST", "url": "http://h/pay", "headers": {...}, "json": VALUE}`
(or `"body": TEXT`, or raw bytes under `"body"`), optionally `"etag": VALUE` for a Class B request
(the same as `reel effect --version-ref etag=VALUE`) and `"secrets"` (references the store resolves at
send time). Any other key is refused (E014 naming it): a misspelt `"jsn"` would otherwise be stored and
sent as a request without a body. Numbers in `json` may be floats; they are sent in their shortest
round-trip text (`0.7`, not `0.69999…`).
Its resource name is `http:METHOD:URL`; `reelstore.backend.service_rules` classes and delivers it by config.

A request goes out in two phases, kept apart by the code's structure rather than guessed from an
exception's type afterwards: first urllib3's `connect()` (name resolution, TCP connect, the TLS
handshake and certificate check), then the request itself and the answer. Whatever goes wrong in the
first phase happened before any byte of the request was written: `not_sent`. After that the fate is
the answer's: 2xx `succeeded`, 4xx `failed` (a definite refusal), and a 5xx, a dropped connection or a
timeout `unknown` (the target may have acted).
"""

from __future__ import annotations

import http.client
import json
import re
import ssl
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.exceptions import ConnectTimeoutError, HTTPError, NameResolutionError, NewConnectionError

from reelstore.adapters.base import Adapter, Admission, NotSent, Result, known_keys, register
from reelstore.adapters.http_pool import pool
from reelstore.adapters.trust import client_context, extra_trust
from reelstore.backend.secrets import MissingSecret, resolve_body, resolve_http, secret_store
from reelstore.backend.service_rules import SAFE_METHODS, Service, classify
from reelstore.codec import FrozenMap, freeze, thaw
from reelstore.errors import BadInput, Conflict, Unreachable
from reelstore.objects.hash import Hash

if TYPE_CHECKING:
    from reelstore.backend.repo import Repo
    from reelstore.objects import Effect

RECEIPT_HEADERS = ("etag", "location", "content-type", "idempotency-key", "date", "last-modified")
METHOD_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
OP_KEYS = ("method", "url", "headers", "json", "body", "etag", "secrets")
"""Every key an http op may have."""
ABSENCE_MARGIN = 5.0
"""Seconds added to http.timeout before a status 404 proves absence: clock steps, the target's own queue."""
MAX_ANSWER = 16 * 1024 * 1024
"""Bytes of an answer's body read at most (a receipt keeps only its hash and length)."""


class Unsent(Exception):  # noqa: N818
    """The connect phase failed: no byte of the request was written. `why` says what failed."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


class Lost(Exception):  # noqa: N818
    """The request phase failed: the request may have been written in part or whole, no answer came."""


@register
class HttpAdapter(Adapter):
    name = "http"

    def __init__(self, repo: Repo) -> None:
        super().__init__(repo)
        self.timeout = _timeout(repo.config.get("http.timeout", "30") or "30")
        """Seconds to wait for a target (config `http.timeout`, default 30)."""

    def classify(self, op: Mapping[str, Any]) -> Admission:
        check_op(op)
        method, url = _method_url(op)
        _body(op)
        resource = f"http:{method}:{url}"
        svc = classify(self.repo.config, resource, method)
        etag = op.get("etag")
        if etag is not None and not isinstance(etag, str):
            raise BadInput("http op: etag must be a string")
        # A read-like request queued by hand is still an effect: Class C, resent safely (it changes nothing).
        klass = "B" if etag is not None else "C" if svc.read_like else svc.effect_class
        return Admission(resource, klass, svc.delivery, {"kind": "etag", "value": etag} if etag is not None else None)

    def service(self, effect: Effect) -> Service:
        method, _ = _method_url(effect.op)
        svc = classify(self.repo.config, effect.resource, method)
        if not svc.name and method in SAFE_METHODS:
            return Service(name="", match="", delivery="keyed", key_header="")
        return svc

    def absence_window(self, effect: Effect) -> float:
        """A 404 from the status URL proves absence only once the attempt can no longer land: after the
        service rule's `absent-after`, else after this store's send timeout plus a margin (the sender
        gave up by then; a target that works on after its client left must declare `absent-after`)."""
        svc = self.service(effect)
        return svc.absent_after if svc.absent_after is not None else self.timeout + ABSENCE_MARGIN

    def absence_unprovable(self, effect: Effect) -> str:
        svc = classify(self.repo.config, effect.resource, str(effect.op.get("method", "GET")))
        if svc.absence == "unprovable":
            return (
                f"service {svc.name!r} declares absence = unprovable: the target can still act late, "
                "so finding no record of the request proves nothing"
            )
        return ""

    def check_precondition(self, effect: Effect) -> None:
        """Class B: the resource's current ETag must still be the one the view saw (E002 if not)."""
        want = _etag(effect)
        if want is None:
            return
        _, url = _method_url(effect.op)
        try:
            status, headers, _ = self._request("GET", url, {}, None)
        except (Unsent, Lost) as exc:
            raise Unreachable(
                f"cannot check the precondition of {effect.resource}: {exc}; nothing was committed",
                resource=effect.resource,
            ) from None
        have = headers.get("etag")
        if status >= 400 or have != want:
            raise Conflict(
                f"precondition failed for {effect.resource}: expected ETag {want!r}, the target has "
                f"{have!r} (status {status}); nothing was sent",
                resource=effect.resource,
            )

    def fire(self, effect: Effect, token: Any, op_id: str) -> Result:
        svc = self.service(effect)
        method, url = _method_url(effect.op)
        headers = {str(k): str(v) for k, v in thaw(effect.op.get("headers", {})).items()}
        body, ctype = _body(effect.op)
        if ctype and not any(k.lower() == "content-type" for k in headers):
            headers["Content-Type"] = ctype
        if svc.key_header and effect.delivery != "blind":
            headers[svc.key_header] = op_id
        etag = _etag(effect)
        if etag is not None:
            headers["If-Match"] = etag
        if effect.delivery == "two-phase":
            headers["Reel-Phase"] = "prepare"
        try:
            url, headers = resolve_http(secret_store(self.repo), effect.op, url, headers)
            body = resolve_body(secret_store(self.repo), effect.op, body)
            check_headers(headers)
        except (MissingSecret, BadInput) as exc:
            raise NotSent(exc.message) from None
        token.consume(effect.id)
        # A blind request is never resent, so it takes no chance on a kept-alive connection the target
        # may be closing at that moment: that would make its outcome unknown.
        result = self._send(method, url, headers, body, fresh=effect.delivery == "blind")
        if effect.delivery != "two-phase" or result.state != "succeeded":
            return result
        return self._confirm(svc, op_id, dict(result.receipt))

    def reconcile(self, effect: Effect, op_id: str) -> str:
        """Queryable and two-phase: ask the status URL. 200 = done (a prepared two-phase request is
        confirmed first), 404 = absent (proof only after `absence_window`: the drain waits for it),
        anything else = unknown."""
        svc = self.service(effect)
        if effect.delivery not in ("queryable", "two-phase") or not svc.status_url:
            return "unknown"
        try:
            status, _, data = self._request("GET", svc.status_url.format(key=op_id), {}, None)
        except (Unsent, Lost):
            return "unknown"
        if status == 404:
            return "absent"
        if status != 200:
            return "unknown"
        if effect.delivery == "two-phase" and _phase(data) == "prepared":
            return "succeeded" if self._confirm(svc, op_id, {}).state == "succeeded" else "unknown"
        return "succeeded"

    def _confirm(self, svc: Service, op_id: str, prepared: dict[str, Any]) -> Result:
        assert svc.commit_url is not None
        done = self._send("POST", svc.commit_url.format(key=op_id), {svc.key_header: op_id}, b"")
        receipt = {"prepare": prepared, "commit": dict(done.receipt)} if prepared else dict(done.receipt)
        return Result(done.state, receipt, done.note or "prepared and committed")

    def _send(
        self, method: str, url: str, headers: dict[str, str], body: bytes | None, *, fresh: bool = False
    ) -> Result:
        try:
            status, got, data = self._request(method, url, headers, body, fresh=fresh)
        except Unsent as exc:
            return Result("not_sent", note=f"not sent: {exc.why}; no byte of the request left this process")
        except Lost as exc:
            return Result("unknown", note=f"sent, but no answer came back ({exc}); the target may have acted")
        receipt = {
            "status": status,
            "headers": {k: v for k, v in got.items() if k in RECEIPT_HEADERS},
            "body_blake3": Hash.of(data).hex(),
            "body_len": len(data),
        }
        if 200 <= status < 300:
            return Result("succeeded", receipt, f"HTTP {status}")
        if 400 <= status < 500:
            return Result("failed", receipt, f"HTTP {status}: the target refused the request")
        return Result("unknown", receipt, f"HTTP {status}: the answer does not say whether the target acted")

    def _request(
        self, method: str, url: str, headers: dict[str, str], body: bytes | None, *, fresh: bool = False
    ) -> tuple[int, dict[str, str], bytes]:
        """One request, on a kept-alive connection to the host if one is open (`http_pool`), else (or
        if `fresh`) on a new one. Raises Unsent if a new connection (and, for https, the verified TLS
        session) could not be made, Lost if anything failed after that."""
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port or (443 if parts.scheme == "https" else 80)
        https = parts.scheme == "https"
        trust = extra_trust(self.repo.config) if https else None
        key = (parts.scheme, host, port, str(trust or ""))
        kept = pool(self.repo)
        conn = None if fresh else kept.take(key)
        if conn is None:
            conn = (
                HTTPSConnection(host, port, timeout=self.timeout, ssl_context=client_context(self.repo.config))
                if https
                else HTTPConnection(host, port, timeout=self.timeout)
            )
            try:
                conn.connect()
            except Exception as exc:  # noqa: BLE001  (the whole connect phase precedes the request)
                conn.close()
                raise Unsent(_connect_failure(exc, host, port)) from exc
        keep = False
        try:
            path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
            try:
                conn.request(method, path, body=body, headers=headers, preload_content=False)
                resp = conn.getresponse()
                data = resp.read(MAX_ANSWER)
            except (OSError, http.client.HTTPException, HTTPError) as exc:
                raise Lost(repr(exc)) from exc
            answer = {k.lower(): v for k, v in resp.headers.items()}
            # Kept only when nothing is in doubt: the whole answer read, and the target keeps the connection.
            keep = (
                not fresh
                and len(data) < MAX_ANSWER
                and resp.version == 11
                and answer.get("connection", "").lower() != "close"
            )
            return resp.status, answer, data
        finally:
            if keep:
                kept.give(key, conn)
            else:
                conn.close()


def _connect_failure(exc: BaseException, host: str, port: int) -> str:
    """What failed before the request, in words (the fate is already decided by the phase)."""
    if isinstance(exc, NameResolutionError):
        return f"name resolution failed for {host!r}"
    if isinstance(exc, NewConnectionError):
        return f"could not connect to {host}:{port} ({_reason(exc)})"
    if isinstance(exc, ConnectTimeoutError):
        return f"connecting to {host}:{port} timed out"
    if isinstance(exc, (ssl.SSLError, ssl.CertificateError)):
        return f"the TLS handshake with {host}:{port} failed ({_reason(exc)})"
    return f"connecting to {host}:{port} failed ({exc!r})"


def _reason(exc: BaseException) -> str:
    cause = exc.__cause__ or exc.__context__
    if isinstance(cause, OSError) and cause.strerror:
        return cause.strerror
    verify = getattr(exc, "verify_message", None)
    return f"certificate verify failed: {verify}" if verify else str(exc)


def check_op(op: Mapping[str, Any]) -> None:
    """E014 naming the first unknown key of an http op, or a value the store cannot hold exactly (NaN,
    an infinity: named by its path, e.g. `op.json.amount`). Run at admission, before anything is stored."""
    known_keys(op, OP_KEYS, "http")
    if not isinstance(op, FrozenMap):  # a frozen op was checked when it was frozen
        freeze(op, "op")


def _method_url(op: Mapping[str, Any]) -> tuple[str, str]:
    if not isinstance(op, Mapping):
        raise BadInput("http op must be a map with method and url")
    method, url = op.get("method", "GET"), op.get("url")
    if not isinstance(method, str) or not method or not set(method) <= METHOD_CHARS:
        raise BadInput(f"http op: method must be an upper-case HTTP method, not {method!r}")
    if not isinstance(url, str) or urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).hostname:
        raise BadInput(f"http op: url must be an absolute http(s) URL, not {url!r}")
    headers = op.get("headers", {})
    if not isinstance(headers, Mapping) or not all(isinstance(v, (str, int)) for v in headers.values()):
        raise BadInput("http op: headers must be a map of names to strings")
    check_headers(headers)
    return method, url


_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_FIELD_VALUE = re.compile(r"[^\x00-\x08\x0a-\x1f\x7f]*")


def check_headers(headers: Mapping[str, Any]) -> None:
    """E014 naming the header unless every name is an HTTP token and no value holds a control character
    (CR and LF above all: they would end the header and smuggle another). Checked at admission, and
    again on the resolved headers before the fire token is presented, so a bad credential is `not_sent`."""
    for name, value in headers.items():
        if not isinstance(name, str) or not _TOKEN.fullmatch(name):
            raise BadInput(f"http op: header name {name!r} is not a valid HTTP field name", field=f"headers.{name}")
        if not _FIELD_VALUE.fullmatch(str(value)):
            raise BadInput(
                f"http op: header {name} has a control character (CR, LF, NUL…) in its value", field=f"headers.{name}"
            )


def _body(op: Mapping[str, Any]) -> tuple[bytes | None, str]:
    if "json" in op and "body" in op:
        raise BadInput("http op: give json or body, not both")
    if "json" in op:
        text = json.dumps(thaw(op["json"]), sort_keys=True, separators=(",", ":"), allow_nan=False)
        return text.encode("utf-8"), "application/json"
    body = op.get("body")
    if body is None:
        return None, ""
    if isinstance(body, str):
        return body.encode("utf-8"), "text/plain; charset=utf-8"
    if isinstance(body, bytes):
        return body, "application/octet-stream"
    raise BadInput("http op: body must be text or bytes")


def _timeout(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value <= 3600:
        raise BadInput(f"http.timeout must be a number of seconds in (0, 3600], not {text!r}")
    return value


def _etag(effect: Effect) -> str | None:
    """The ETag a Class B effect was admitted against (`--version-ref etag=VALUE`, or `etag` in the op)."""
    ref = effect.version_ref
    if not ref:
        return None
    value = ref.get("value")
    if ref.get("kind") != "etag" or not isinstance(value, str):
        raise BadInput(f"an http Class B effect needs an etag version ref, not {dict(ref)!r}")
    return value


def _phase(data: bytes) -> str:
    try:
        doc = json.loads(data or b"{}")
    except ValueError:
        return ""
    return str(doc.get("state", "")) if isinstance(doc, dict) else ""
