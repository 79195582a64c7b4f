"""A real HTTP target for the effect tests: a threaded server on 127.0.0.1 with its own ledger.

The ledger (one JSON line per effect the target acted on, fsync'd before any answer) is the oracle:
reelstore never reads it. Routes, one per delivery tier:

    POST /keyed/...            dedups on Idempotency-Key: a repeated key acts once, answers the same
    POST /query/...            acts on every request; GET /query/status/{key} answers 200 or 404
    POST /tp/...               Reel-Phase: prepare holds the request; POST /tp/commit/{key} acts once;
                               GET /tp/status/{key} answers {"state": "prepared"|"committed"} or 404
    POST /blind/...            acts on every request
    GET /doc, PUT /doc         an ETag'd document: PUT needs If-Match with the current ETag (else 412)

Faults (`fault` attribute): "kill-after-append" appends, SIGKILLs the client process (`victim`), then
drops the connection; "drop-after-append" appends and drops; "drop-before-append" drops without acting;
"stall-after-append" appends, sets `stalled`, and answers only once `unstall` is set (other requests
are served meanwhile); "refuse" answers 422 without acting; "error-before-append" answers 500 without
acting.
`fault_routes` limits a fault to paths starting with one of those prefixes (default: every acting route).

`answers` lists every answer the target gave, in order (`"POST /blind/pay -> 201"`; a request line it
could not parse is quoted as it came), so a failing test can say what the target saw.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path

from loopback_server import LoopbackServer


class Target(LoopbackServer):
    def __init__(self, ledger: Path, port: int = 0) -> None:
        self.ledger_path = Path(ledger)
        self.ledger_path.touch()
        self.fault: str | None = None
        self.fault_routes: tuple[str, ...] = ("/keyed", "/query", "/tp", "/blind", "/doc")
        self.victim: int | None = None
        self.keyed: dict[str, bytes] = {}
        self.prepared: dict[str, dict] = {}
        self.committed: set[str] = set()
        self.doc_version = 1
        self.requests = 0
        self.answers: list[str] = []
        self.authorizations: list[str] = []
        """The Authorization header of every POST or PUT, in order ("" if it had none)."""
        self.lock = threading.Lock()
        self.stalled = threading.Event()
        self.unstall = threading.Event()
        self._listen(_handler(self), port)

    def count(self, route: str) -> int:
        return sum(1 for e in self.ledger() if e["path"].startswith(route))

    def append(self, path: str, key: str, body: bytes) -> None:
        with self.ledger_path.open("a") as f:
            f.write(json.dumps({"path": path, "key": key, "body": body.decode("utf-8", "replace")}) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def faulted(self, path: str) -> str | None:
        return self.fault if self.fault and path.startswith(self.fault_routes) else None


def _handler(target: Target) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *_: object) -> None:
            pass

        def send_response(self, code: int, message: str | None = None) -> None:
            what = f"{self.command} {self.path}" if self.command else f"unparsed {self.requestline!r}"
            target.answers.append(f"{what} -> {code}")  # list.append is atomic: no lock (a parse error holds none)
            super().send_response(code, message)

        def _answer(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
            self.send_response(status)
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _drop(self) -> None:
            self.close_connection = True
            self.connection.shutdown(2)

        def _act(self, key: str, body: bytes) -> bool:
            """Append to the ledger, applying the fault; False if the connection was dropped."""
            fault = target.faulted(self.path)
            if fault == "drop-before-append":
                self._drop()
                return False
            target.append(self.path, key, body)
            if fault == "kill-after-append":
                for _ in range(1000):
                    if target.victim is not None:
                        break
                    time.sleep(0.01)
                if target.victim is not None:
                    os.kill(target.victim, signal.SIGKILL)
                self._drop()
                return False
            if fault == "drop-after-append":
                self._drop()
                return False
            if fault == "stall-after-append":
                target.lock.release()
                try:
                    target.stalled.set()
                    target.unstall.wait(30)
                finally:
                    target.lock.acquire()
            return True

        def do_GET(self) -> None:
            with target.lock:
                target.requests += 1
                if self.path.startswith("/query/status/"):
                    key = self.path.rsplit("/", 1)[1]
                    found = any(e["key"] == key and e["path"].startswith("/query/") for e in target.ledger())
                    self._answer(200 if found else 404, b'{"state":"done"}' if found else b"")
                elif self.path.startswith("/tp/status/"):
                    key = self.path.rsplit("/", 1)[1]
                    if key in target.committed:
                        self._answer(200, b'{"state":"committed"}')
                    elif key in target.prepared:
                        self._answer(200, b'{"state":"prepared"}')
                    else:
                        self._answer(404)
                elif self.path == "/doc":
                    self._answer(200, b"doc", {"ETag": f'"v{target.doc_version}"'})
                else:
                    self._answer(200, b"ok")

        def do_PUT(self) -> None:
            self.do_POST()

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            key = self.headers.get("Idempotency-Key", "")
            with target.lock:
                target.requests += 1
                target.authorizations.append(self.headers.get("Authorization", ""))
                if target.faulted(self.path) in ("refuse", "error-before-append"):
                    self._answer(422 if target.fault == "refuse" else 500, b"no")
                    return
                if self.path.startswith("/keyed/"):
                    if key and key in target.keyed:
                        self._answer(200, target.keyed[key], {"Idempotency-Key": key})
                        return
                    if key and target.faulted(self.path) != "drop-before-append":
                        target.keyed[key] = b'{"ok":true}'
                    if self._act(key, body):
                        self._answer(201, b'{"ok":true}', {"Idempotency-Key": key})
                elif self.path.startswith("/tp/commit/"):
                    key = self.path.rsplit("/", 1)[1]
                    if key not in target.prepared:
                        self._answer(404)
                    elif key in target.committed:
                        self._answer(200, b'{"state":"committed"}')
                    else:
                        target.committed.add(key)
                        if self._act(key, target.prepared[key]["body"]):
                            self._answer(200, b'{"state":"committed"}')
                elif self.path.startswith("/tp/"):
                    if self.headers.get("Reel-Phase") != "prepare" or not key:
                        self._answer(400, b"two-phase needs Reel-Phase: prepare and a key")
                    else:
                        target.prepared.setdefault(key, {"path": self.path, "body": body})
                        self._answer(202, b'{"state":"prepared"}')
                elif self.path == "/doc":
                    if self.headers.get("If-Match") != f'"v{target.doc_version}"':
                        self._answer(412, b"precondition failed")
                    elif self._act(key, body):
                        target.doc_version += 1
                        self._answer(200, b"saved", {"ETag": f'"v{target.doc_version}"'})
                elif self.path.startswith(("/query/", "/blind/")):
                    if self._act(key, body):
                        self._answer(201, b'{"ok":true}')
                else:
                    self._answer(404)

    return Handler


TIERS = ("keyed", "queryable", "two-phase", "blind")
ROUTES = {"keyed": "/keyed", "queryable": "/query", "two-phase": "/tp", "blind": "/blind"}


def configure(config, base: str) -> None:  # noqa: ANN001  (a reelstore Config)
    """Service rules for every tier's route on the target at `base` (blind needs none: it is the default)."""
    config.set("service.keyed.match", f"http:POST:{base}/keyed")
    config.set("service.keyed.delivery", "keyed")
    config.set("service.query.match", f"http:POST:{base}/query")
    config.set("service.query.delivery", "queryable")
    config.set("service.query.status-url", f"{base}/query/status/{{key}}")
    # this target acts before it answers or never: its 404 proves absence at once (no processing window)
    config.set("service.query.absent-after", "0")
    config.set("service.tp.match", f"http:POST:{base}/tp")
    config.set("service.tp.delivery", "two-phase")
    config.set("service.tp.status-url", f"{base}/tp/status/{{key}}")
    config.set("service.tp.commit-url", f"{base}/tp/commit/{{key}}")
    config.set("service.tp.absent-after", "0")


def pay_op(base: str, tier: str, amount: int = 5) -> dict:
    return {"method": "POST", "url": f"{base}{ROUTES[tier]}/pay", "json": {"amount": amount}}
