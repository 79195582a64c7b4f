"""The http adapter against the real target: classification by config, tiers, receipts, Class B."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from target import Target, configure, pay_op

from reelstore.adapters.base import adapter
from reelstore.api import Store
from reelstore.codec import thaw
from reelstore.drain import journal as drainlog
from reelstore.errors import BadInput, Conflict


@pytest.fixture
def setup(tmp_path: Path):
    with Target(tmp_path / "ledger.jsonl") as target:
        store = Store.init(tmp_path / "s")
        configure(store.repo.config, target.url)
        yield store, target


def journal(store: Store) -> list:
    return list(drainlog.walk(store.repo, store.repo.refs.get("refs/drains/main")))


def test_classification_comes_from_config(setup) -> None:
    store, target = setup
    http = adapter("http", store.repo)
    keyed = http.classify(pay_op(target.url, "keyed"))
    assert (keyed.resource, keyed.effect_class, keyed.delivery) == (f"http:POST:{target.url}/keyed/pay", "C", "keyed")
    assert http.classify(pay_op(target.url, "queryable")).delivery == "queryable"
    assert http.classify({"method": "POST", "url": f"{target.url}/keyedx"}).delivery == "blind"
    assert http.classify({"method": "DELETE", "url": "http://example.invalid/x"}).delivery == "blind"
    assert http.classify({"method": "GET", "url": "http://example.invalid/x"}).delivery == "keyed"
    b = http.classify({"method": "PUT", "url": f"{target.url}/doc", "body": "x", "etag": '"v1"'})
    assert b.effect_class == "B" and dict(b.version_ref) == {"kind": "etag", "value": '"v1"'}
    for bad in (
        {"url": "ftp://h/x"},
        {"method": "post", "url": "http://h/x"},
        {"method": "POST"},
        {"method": "POST", "url": "http://h/x", "json": 1, "body": "x"},
        {"method": "POST", "url": "http://h", "headers": {"a": [1]}},
    ):
        with pytest.raises(BadInput):
            http.classify(bad)
    store.repo.config.set("service.broken.match", "http:POST:http://h/q")
    store.repo.config.set("service.broken.delivery", "queryable")
    with pytest.raises(BadInput, match="status-url"):
        http.classify({"method": "POST", "url": "http://h/q"})


def test_keyed_sends_the_op_id_as_key_and_a_receipt_is_journaled(setup) -> None:
    store, target = setup
    v = store.fork("a")
    v.effect(
        "http",
        {"method": "POST", "url": f"{target.url}/keyed/pay", "json": {"amount": 3}, "headers": {"X-Trace": "t1"}},
    )
    res = v.commit()
    (o,) = res.drain.outcomes
    assert o.state == "succeeded"
    (entry,) = target.ledger()
    assert entry["key"] == o.op and entry["body"] == '{"amount":3}'
    receipt = thaw(journal(store)[0].receipt)
    assert receipt["status"] == 201 and receipt["headers"]["idempotency-key"] == o.op
    assert len(receipt["body_blake3"]) == 64 and receipt["body_len"] == len(b'{"ok":true}')


def test_refusals_and_silence_are_told_apart(setup, tmp_path: Path) -> None:
    store, target = setup
    v = store.fork("a")
    v.effect("http", {"method": "POST", "url": f"{target.url}/nowhere", "body": b"\x00\x01"})
    v.effect("http", {"method": "POST", "url": "http://127.0.0.1:9/closed", "body": "x"})
    res = v.commit(check=False)
    assert [(o.state, o.note[:8]) for o in res.drain.outcomes] == [("failed", "HTTP 404"), ("not_sent", "not sent")]
    assert target.ledger() == []
    w = store.fork("b")
    w.effect("http", pay_op(target.url, "blind"))
    target.fault = "drop-before-append"
    res = w.commit(check=False)
    assert res.drain.outcomes[0].state == "unknown" and target.ledger() == []


def test_two_phase_prepares_then_confirms_once(setup) -> None:
    store, target = setup
    v = store.fork("a")
    v.effect("http", pay_op(target.url, "two-phase"))
    (o,) = v.commit().drain.outcomes
    assert o.state == "succeeded" and target.count("/tp/commit/") == 1
    assert set(thaw(journal(store)[0].receipt)) == {"prepare", "commit"}


def test_class_b_precondition_is_rechecked_at_commit(setup) -> None:
    store, target = setup
    head = store.repo.refs["refs/heads/main"]
    stale, fresh = store.fork("stale"), store.fork("fresh")
    stale.effect("http", {"method": "PUT", "url": f"{target.url}/doc", "body": "old", "etag": '"v1"'})
    fresh.effect("http", {"method": "PUT", "url": f"{target.url}/doc", "body": "new", "etag": '"v1"'})
    assert fresh.commit().drain.outcomes[0].state == "succeeded"
    assert target.count("/doc") == 1 and target.doc_version == 2
    moved = store.repo.refs["refs/heads/main"]
    assert moved != head
    requests = target.requests
    with pytest.raises(Conflict, match="precondition"):
        stale.commit()
    assert store.repo.refs["refs/heads/main"] == moved and target.count("/doc") == 1
    assert target.requests == requests + 1


def test_class_b_from_the_command_line(setup, reel) -> None:
    store, target = setup
    cwd = store.repo.path.parent
    op = json.dumps({"method": "PUT", "url": f"{target.url}/doc", "body": "x"})
    assert reel("fork", "a", cwd=cwd).returncode == 0
    assert (
        reel(
            "effect", "a", "--adapter", "http", "--op", op, "--class", "B", "--version-ref", 'etag="v9"', cwd=cwd
        ).returncode
        == 0
    )
    refused = reel("commit", "a", cwd=cwd)
    assert refused.returncode == 5 and b"E002" in refused.stderr and target.count("/doc") == 0
    assert reel("fork", "b", cwd=cwd).returncode == 0
    assert (
        reel(
            "effect", "b", "--adapter", "http", "--op", op, "--class", "B", "--version-ref", 'etag="v1"', cwd=cwd
        ).returncode
        == 0
    )
    assert reel("commit", "b", cwd=cwd).returncode == 0 and target.count("/doc") == 1


class _Counting(BaseHTTPRequestHandler):
    """Answers every POST 200; counts the TCP connections it accepts; `/close` answers with
    `Connection: close` and closes."""

    protocol_version = "HTTP/1.1"
    accepted: list[int] = []

    def setup(self) -> None:
        super().setup()
        self.accepted.append(1)

    def log_message(self, *_: object) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Length", "2")
        if self.path.startswith("/close"):
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(b"ok")


def test_a_drain_keeps_one_connection_per_host_and_drops_one_in_doubt(tmp_path: Path) -> None:
    """Keyed requests to one host share one kept-alive connection within a drain and across drains of
    one store handle; after an answer with `Connection: close` the connection is not reused, and every
    blind request gets a connection of its own."""
    _Counting.accepted = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Counting)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        store = Store.init(tmp_path / "s")
        store.repo.config.set("service.k.match", f"http:POST:{url}/k")
        store.repo.config.set("service.k.delivery", "keyed")
        store.repo.config.set("service.c.match", f"http:POST:{url}/close")
        store.repo.config.set("service.c.delivery", "keyed")
        with store.view("a") as v:
            for i in range(5):
                v.effect("http", {"method": "POST", "url": f"{url}/k", "json": {"i": i}})
        assert v.result is not None and v.result.drain is not None and v.result.drain.sent == 5
        assert len(_Counting.accepted) == 1
        with store.view("b") as v:
            v.effect("http", {"method": "POST", "url": f"{url}/k", "json": {"i": 5}})
        assert len(_Counting.accepted) == 1, "the next drain of the same store handle reused the connection"
        with store.view("c") as v:
            v.effect("http", {"method": "POST", "url": f"{url}/close", "json": {}})
            v.effect("http", {"method": "POST", "url": f"{url}/close", "json": {}})
            v.effect("http", {"method": "POST", "url": f"{url}/blind", "json": {}})
            v.effect("http", {"method": "POST", "url": f"{url}/blind", "json": {}})
        assert v.result is not None and v.result.drain is not None and v.result.drain.complete
        # the kept connection served the first /close and was then closed; the second /close and each
        # blind request opened one
        assert len(_Counting.accepted) == 4
        with store.view("d") as v:
            v.effect("http", {"method": "POST", "url": f"{url}/k", "json": {"i": 6}})
        assert v.result is not None and v.result.drain is not None and v.result.drain.complete
        assert len(_Counting.accepted) == 5
    finally:
        server.shutdown()
        server.server_close()
