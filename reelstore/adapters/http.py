"""The http adapter: any method and URL, a JSON or bytes body, headers; delivered per service rule.

An operation is a map: `{"method": "POST", "url": "http://h/pay", "headers": {...}, "json": VALUE}`
(or `"body": TEXT`, or raw bytes under `"body"`), optionally `"etag": VALUE` for a Class B request
(the same as `reel effect --version-ref etag=VALUE`).
Its resource name is `http:METHOD:URL`; `reelstore.drain.services` classes and delivers it by config.

Outcomes are judged conservatively: a 2xx answer is `succeeded`; a 4xx answer (the target refused)
is `failed`; a refused connection is `failed` (nothing left the machine); anything that may have
reached the target without a definite answer (a dropped connection, a timeout, a 5xx) is `unknown`.
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from reelstore.adapters.base import Adapter, Admission, Result, register
from reelstore.codec import thaw
from reelstore.drain.services import SAFE_METHODS, Service, classify
from reelstore.errors import BadInput, Conflict
from reelstore.objects.hash import Hash

if TYPE_CHECKING:
    from reelstore.objects import Effect
    from reelstore.storage.repo import Repo

RECEIPT_HEADERS = ("etag", "location", "content-type", "idempotency-key", "date", "last-modified")
METHOD_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ")


@register
class HttpAdapter(Adapter):
    name = "http"

    def __init__(self, repo: Repo) -> None:
        super().__init__(repo)
        self.timeout = _timeout(repo.config.get("http.timeout", "30") or "30")
        """Seconds to wait for a target (config `http.timeout`, default 30)."""

    def classify(self, op: Mapping[str, Any]) -> Admission:
        method, url = _method_url(op)
        _body(op)
        resource = f"http:{method}:{url}"
        svc = classify(self.repo.config, resource, method)
        etag = op.get("etag")
        if etag is not None and not isinstance(etag, str):
            raise BadInput("http op: etag must be a string")
        klass = "B" if etag is not None else svc.effect_class
        return Admission(resource, klass, svc.delivery, {"kind": "etag", "value": etag} if etag is not None else None)

    def service(self, effect: Effect) -> Service:
        method, _ = _method_url(effect.op)
        svc = classify(self.repo.config, effect.resource, method)
        if not svc.name and method in SAFE_METHODS:
            return Service(name="", match="", delivery="keyed", key_header="")
        return svc

    def check_precondition(self, effect: Effect) -> None:
        """Class B: the resource's current ETag must still be the one the view saw (E002 if not)."""
        want = _etag(effect)
        if want is None:
            return
        _, url = _method_url(effect.op)
        status, headers, _ = self._request("GET", url, {}, None)
        have = headers.get("etag")
        if status >= 400 or have != want:
            raise Conflict(f"precondition failed for {effect.resource}: expected ETag {want!r}, the target has "
                           f"{have!r} (status {status}); nothing was sent", resource=effect.resource)

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
        token.consume(effect.id)
        result = self._send(method, url, headers, body)
        if effect.delivery != "two-phase" or result.state != "succeeded":
            return result
        return self._confirm(svc, op_id, dict(result.receipt))

    def reconcile(self, effect: Effect, op_id: str) -> str:
        """Queryable and two-phase: ask the status URL. 200 = done (a prepared two-phase request is
        confirmed first), 404 = absent, anything else = unknown."""
        svc = self.service(effect)
        if effect.delivery not in ("queryable", "two-phase") or not svc.status_url:
            return "unknown"
        status, _, data = self._request("GET", svc.status_url.format(key=op_id), {}, None)
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

    def _send(self, method: str, url: str, headers: dict[str, str], body: bytes | None) -> Result:
        try:
            status, got, data = self._request(method, url, headers, body)
        except ConnectionRefusedError as exc:
            return Result("failed", note=f"connection refused ({exc}); nothing was sent")
        except (OSError, http.client.HTTPException) as exc:
            return Result("unknown", note=f"the request may have reached the target but no answer came back: {exc!r}")
        receipt = {"status": status, "headers": {k: v for k, v in got.items() if k in RECEIPT_HEADERS},
                   "body_blake3": Hash.of(data).hex(), "body_len": len(data)}
        if 200 <= status < 300:
            return Result("succeeded", receipt, f"HTTP {status}")
        if 400 <= status < 500:
            return Result("failed", receipt, f"HTTP {status}: the target refused the request")
        return Result("unknown", receipt, f"HTTP {status}: the target may or may not have acted")

    def _request(self, method: str, url: str, headers: dict[str, str],
                 body: bytes | None) -> tuple[int, dict[str, str], bytes]:
        parts = urlsplit(url)
        conn_cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        conn = conn_cls(parts.hostname or "", parts.port, timeout=self.timeout)
        try:
            path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
            conn.request(method, path, body=body, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, data
        finally:
            conn.close()


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
    return method, url


def _body(op: Mapping[str, Any]) -> tuple[bytes | None, str]:
    if "json" in op and "body" in op:
        raise BadInput("http op: give json or body, not both")
    if "json" in op:
        return json.dumps(thaw(op["json"]), sort_keys=True, separators=(",", ":")).encode("utf-8"), "application/json"
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
    if ref.get("kind") != "etag" or not isinstance(ref.get("value"), str):
        raise BadInput(f"an http Class B effect needs an etag version ref, not {dict(ref)!r}")
    return ref["value"]


def _phase(data: bytes) -> str:
    try:
        doc = json.loads(data or b"{}")
    except ValueError:
        return ""
    return str(doc.get("state", "")) if isinstance(doc, dict) else ""
