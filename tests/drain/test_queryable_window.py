"""Queryable (and two-phase) recovery waits for evidence: a status 404 proves an operation absent only
once its last attempt can no longer land. A real loopback target that is still processing a request answers 404 on
its status URL; the committing process is killed with SIGKILL mid-send; an immediate `reel recover`
must not resend, and a later one settles the operation with one request in the ledger."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from conftest import REEL


class Processing:
    """POST /query/... (or a two-phase prepare, /tp/...) is held "in processing" until `finish` is set,
    then recorded (or, with `lose_first`, the first one is dropped unrecorded); GET …/status/KEY answers
    200 once KEY is recorded (`{"state": "prepared"}` or `"committed"` for two-phase), else 404;
    POST /tp/commit/KEY confirms a prepared request."""

    def __init__(self, lose_first: bool = False) -> None:
        self.lose_first = lose_first
        self.finish = threading.Event()
        self.received = threading.Event()
        self.posts = 0
        self.status_404 = 0
        self.recorded: list[str] = []
        self.committed: list[str] = []
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_: object) -> None:
                pass

            def do_POST(self) -> None:
                key = self.headers.get("Idempotency-Key", "")
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.path.startswith("/tp/commit/"):
                    with outer.lock:
                        known = key in outer.recorded
                        if known and key not in outer.committed:
                            outer.committed.append(key)
                    self.send_response(200 if known else 404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                with outer.lock:
                    outer.posts += 1
                    first = outer.posts == 1
                outer.received.set()
                if first:
                    outer.finish.wait(30)
                    if outer.lose_first:
                        self.close_connection = True
                        return
                with outer.lock:
                    outer.recorded.append(key)
                try:
                    self.send_response(201)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                except OSError:
                    pass  # the client that sent it was killed

            def do_GET(self) -> None:
                key = self.path.rsplit("/", 1)[-1]
                with outer.lock:
                    done = key in outer.recorded
                    outer.status_404 += not done
                    body = b'{"state": "%s"}' % (b"committed" if key in outer.committed else b"prepared")
                self.send_response(200 if done else 404)
                self.send_header("Content-Length", str(len(body) if done else 0))
                self.end_headers()
                if done:
                    self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.finish.set()
        self.server.shutdown()
        self.server.server_close()


def _reel(store: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if k != "REEL_DIR"}
    return subprocess.run([REEL, "-C", str(store), *args], capture_output=True, env=env, timeout=60)


def _killed_mid_send(tmp_path: Path, target: Processing, *config: tuple[str, str], tier: str = "queryable") -> Path:
    """A store whose `reel commit` was SIGKILLed while the target held its refund in processing."""
    store = tmp_path / "store"
    store.mkdir()
    route = "/tp" if tier == "two-phase" else "/query"
    rule = [
        ("service.pay.match", f"http:POST:{target.url}{route}"),
        ("service.pay.delivery", tier),
        ("service.pay.status-url", f"{target.url}{route}/status/{{key}}"),
    ]
    if tier == "two-phase":
        rule.append(("service.pay.commit-url", f"{target.url}/tp/commit/{{key}}"))
    for args in (
        ("init",),
        *(("config", k, v) for k, v in [*rule, *config]),
        ("fork", "v"),
        (
            "effect",
            "v",
            "--adapter",
            "http",
            "--op",
            f'{{"method": "POST", "url": "{target.url}{route}/refund", "json": {{"amount": 0.5}}}}',
        ),
    ):
        done = _reel(store, *args)
        assert done.returncode == 0, (args, done.stderr.decode())
    env = {k: v for k, v in os.environ.items() if k != "REEL_DIR"}
    committing = subprocess.Popen(
        [REEL, "-C", str(store), "commit", "v"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        assert target.received.wait(30), "the commit never reached the target"
    finally:
        committing.send_signal(signal.SIGKILL)
        committing.wait(30)
    assert committing.returncode == -signal.SIGKILL
    return store


@pytest.mark.parametrize("tier", ["queryable", "two-phase"])
def test_an_early_404_is_not_proof_and_the_processed_refund_is_found(tmp_path: Path, tier: str) -> None:
    target = Processing()
    try:
        # default window: http.timeout (1 s here) plus the margin
        store = _killed_mid_send(tmp_path, target, ("http.timeout", "1"), tier=tier)
        early = _reel(store, "recover")
        assert early.returncode == 7, early.stderr.decode()  # unknown: left for later, not resent
        assert b"may still land" in early.stdout + early.stderr
        assert target.posts == 1 and target.status_404 >= 1
        target.finish.set()  # the target finishes processing and records the refund
        for _ in range(200):
            if target.recorded:
                break
            time.sleep(0.05)
        later = _reel(store, "recover")
        assert later.returncode == 0, later.stderr.decode()
        assert target.posts == 1 and len(target.recorded) == 1
        assert len(target.committed) == (1 if tier == "two-phase" else 0)
    finally:
        target.close()


def test_after_the_declared_window_a_404_proves_absence_and_it_is_sent_once(tmp_path: Path) -> None:
    target = Processing(lose_first=True)
    try:
        store = _killed_mid_send(tmp_path, target, ("service.pay.absent-after", "2"))
        early = _reel(store, "recover")
        assert early.returncode == 7, early.stderr.decode()
        assert target.posts == 1
        target.finish.set()  # the first request is dropped unrecorded: it will never land
        deadline = time.monotonic() + 20
        while True:
            done = _reel(store, "recover")
            if done.returncode == 0:
                break
            assert done.returncode == 7 and target.posts == 1, (done.returncode, done.stderr.decode())
            assert time.monotonic() < deadline, "recover never settled the operation"
            time.sleep(0.5)
        assert target.posts == 2 and len(target.recorded) == 1
    finally:
        target.close()
