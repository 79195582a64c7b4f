"""An HTTP proxy on 127.0.0.1 that passes safe requests through and captures unsafe ones as effects.

The command finds it through `HTTP_PROXY` / `http_proxy`. GET, HEAD, OPTIONS and TRACE go to the real
target and the answer is relayed unchanged. POST, PUT, PATCH, DELETE (any other method) never leave
the machine: each is admitted into the view as an `http` effect (the op the http adapter delivers at
commit: method, URL, the request's end-to-end headers, its body) and the command is answered
`202 Accepted` with a JSON body and a `Reel-Effect: <id>` header. A request the view refuses
(capability, budget, expiry, hold) is answered 403 with the E-code in the JSON body; a malformed one
400. `CONNECT` (https) is refused with 502: intercepting TLS is out of scope, and `HTTPS_PROXY` points
here too so that an https request fails loudly instead of slipping past the view.
"""

from __future__ import annotations

import http.client
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from reelstore.drain.services import SAFE_METHODS
from reelstore.errors import BadInput, ReelError
from reelstore.intercept.base import Backend, Launch, Refusal
from reelstore.kernel import verbs as kernel
from reelstore.storage.repo import Repo

HOP_BY_HOP = frozenset(("connection", "keep-alive", "proxy-connection", "proxy-authorization", "proxy-authenticate",
                        "te", "trailer", "trailers", "transfer-encoding", "upgrade", "host", "content-length"))
MAX_BODY = 64 << 20
"""Largest request body the proxy buffers (64 MiB); a larger one is answered 413."""
UPSTREAM_TIMEOUT = 30.0
PROXY_VARS = ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy")
BYPASS_VARS = ("NO_PROXY", "no_proxy")


class HttpProxy(Backend):
    name = "http"

    def __init__(self, repo: Repo, view: str) -> None:
        super().__init__(repo, view)
        self.captured: list[dict[str, Any]] = []
        self.passed: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._over = False
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        assert self._server is not None, "the proxy is not started"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self, launch: Launch) -> None:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="reel-run-proxy", daemon=True)
        self._thread.start()
        for var in PROXY_VARS:
            launch.env[var] = self.url
        for var in BYPASS_VARS:
            launch.env[var] = None

    def finish(self) -> None:
        """Admit nothing more: a straggler the command left running cannot add to a view already shown."""
        with self._lock:
            self._over = True
        self.close()

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def capture(self, method: str, url: str, headers: dict[str, str], body: bytes) -> tuple[int, dict[str, Any]]:
        """Admit one unsafe request into the view: (status, JSON answer) for the command."""
        op: dict[str, Any] = {"method": method, "url": url, "headers": headers}
        if body:
            try:
                op["body"] = body.decode("utf-8")
            except UnicodeDecodeError:
                op["body"] = body
        what = f"{method} {url}"
        with self._lock:
            if self._over:
                return 503, {"reel": "error", "message": "the run is over; nothing was captured or sent"}
            try:
                made = kernel.effect(self.repo, self.view, "http", op)
            except ReelError as err:
                self.refused.append(Refusal.of(self.name, what, err))
                status = 400 if isinstance(err, BadInput) else 403
                return status, {"reel": "refused", "view": self.view, "error": err.to_json()}
            self.captured.append({"method": method, "url": url, "effect": made.id.hex()})
        return 202, {"reel": "pending", "view": self.view, "effect": made.id.hex(), "class": made.effect_class,
                     "delivery": made.delivery, "resource": made.resource,
                     "note": "captured by reel run; it is sent only if the view is committed"}

    def relay(self, method: str, url: str, headers: dict[str, str],
              body: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
        """Send a safe request to its real target and bring the answer back."""
        parts = urlsplit(url)
        conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=UPSTREAM_TIMEOUT)
        try:
            path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
            conn.request(method, path, body=body or None, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
            with self._lock:
                self.passed.append({"method": method, "url": url, "status": resp.status})
            return resp.status, [(k, v) for k, v in resp.getheaders() if k.lower() not in HOP_BY_HOP], data
        finally:
            conn.close()


def _handler(proxy: HttpProxy) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "reel-run"

        def log_message(self, *_: object) -> None:
            pass

        def _answer(self, status: int, body: bytes, headers: list[tuple[str, str]] | None = None,
                    ctype: str | None = "application/json") -> None:
            self.send_response(status)
            for k, v in headers or ():
                self.send_header(k, v)
            if ctype:
                self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Connection", "close")
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)
            self.close_connection = True

        def _json(self, status: int, doc: dict[str, Any], headers: list[tuple[str, str]] | None = None) -> None:
            self._answer(status, (json.dumps(doc, sort_keys=True) + "\n").encode("utf-8"), headers)

        def _error(self, status: int, message: str) -> None:
            self._json(status, {"reel": "error", "message": message})

        def do_CONNECT(self) -> None:
            self._error(502, "reel run intercepts plain http only; https (CONNECT) is refused because "
                             "intercepting TLS is out of scope. Nothing was sent.")

        def _handle(self) -> None:
            url = self.path
            parts = urlsplit(url)
            if parts.scheme != "http" or not parts.hostname:
                self._error(400, f"reel run's proxy needs an absolute http:// URL, not {url!r}")
                return
            if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
                self._error(411, "reel run's proxy needs a Content-Length; chunked bodies are not accepted")
                return
            text = self.headers.get("Content-Length") or "0"
            length = int(text) if text.isdigit() else -1
            if length < 0:
                self._error(400, f"bad Content-Length {text!r}")
                return
            if length > MAX_BODY:
                self._error(413, f"request body of {length} bytes is over reel run's limit of {MAX_BODY}")
                return
            body = self.rfile.read(length) if length else b""
            headers: dict[str, str] = {}
            for k, v in self.headers.items():
                if k.lower() not in HOP_BY_HOP:
                    headers[k] = f"{headers[k]}, {v}" if k in headers else v
            method = self.command
            if method in SAFE_METHODS:
                try:
                    status, got, data = proxy.relay(method, url, headers, body)
                except (OSError, http.client.HTTPException) as exc:
                    self._error(502, f"reel run could not reach {url}: {exc}")
                    return
                self._answer(status, data, got, ctype=None)
                return
            status, doc = proxy.capture(method, url, headers, body)
            extra = [("Reel-Effect", doc["effect"])] if "effect" in doc else []
            self._json(status, doc, extra)

        do_GET = do_HEAD = do_OPTIONS = do_TRACE = _handle
        do_POST = do_PUT = do_PATCH = do_DELETE = _handle

    return Handler
