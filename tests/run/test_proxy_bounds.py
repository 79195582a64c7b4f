"""`reel run`'s proxy holds bounded memory: request bodies held at once across connections fit a byte
budget (a request that would go over is answered 413 and reported, nothing sent), and connections
over the cap are answered 503 and closed. Real sockets against the real engine, on loopback."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import pytest

from reelstore import Store
from reelstore.intercept.base import Launch
from reelstore.intercept.engine import Request
from reelstore.intercept.http_proxy import HttpProxy
from reelstore.intercept.tls_proxy import TlsProxy

MIB = 1 << 20


def _proxy(tmp_path: Path) -> tuple[HttpProxy, TlsProxy]:
    store = Store.init(tmp_path)
    store.fork("v")
    proxy = HttpProxy(
        store.repo, "v", engine=lambda pol, minter, ca: TlsProxy(pol, minter, ca, max_connections=2, budget=4 * MIB)
    )
    proxy.start(Launch())
    return proxy, proxy._engine


def _until(cond, what: str) -> None:
    for _ in range(500):
        if cond():
            return
        time.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


def _head(port: int, length: int) -> bytes:
    return (
        f"POST http://127.0.0.1:9/pay HTTP/1.1\r\nHost: 127.0.0.1:9\r\nContent-Type: text/plain\r\n"
        f"Content-Length: {length}\r\n\r\n"
    ).encode()


def _status(sock: socket.socket) -> tuple[int, bytes]:
    data = b""
    for _ in range(1000):
        chunk = sock.recv(65536)
        data += chunk
        if not chunk or b"\r\n\r\n" in data:
            break
    return int(data.split(b" ", 2)[1]), data


def test_bodies_held_at_once_fit_the_budget(tmp_path: Path) -> None:
    proxy, engine = _proxy(tmp_path)
    try:
        a = socket.create_connection(("127.0.0.1", proxy.port))
        a.sendall(_head(proxy.port, 3 * MIB + 10) + b"a" * (3 * MIB))
        _until(lambda: engine.buffered >= 3 * MIB, "the first body to be held")
        b = socket.create_connection(("127.0.0.1", proxy.port))
        b.sendall(_head(proxy.port, 2 * MIB) + b"b" * (2 * MIB))
        status, _ = _status(b)
        assert status == 413
        a.sendall(b"a" * 10)
        status, data = _status(a)
        assert status == 202, data
        a.close()
        b.close()
        _until(lambda: engine.buffered == 0, "every held byte to be released")
        assert len(proxy.captured) == 1
        assert any("held at once" in r.message for r in proxy.refused)
    finally:
        proxy.close()


def test_connections_over_the_cap_are_answered_503(tmp_path: Path) -> None:
    proxy, engine = _proxy(tmp_path)
    try:
        held = [socket.create_connection(("127.0.0.1", proxy.port)) for _ in range(2)]
        _until(lambda: len(engine._conns) == 2, "two connections to be served")
        extra = socket.create_connection(("127.0.0.1", proxy.port))
        extra.sendall(_head(proxy.port, 2) + b"{}")
        status, _ = _status(extra)
        assert status == 503
        for s in held:
            s.close()
        _until(lambda: not engine._conns, "the held connections to end")
        again = socket.create_connection(("127.0.0.1", proxy.port))
        again.sendall(_head(proxy.port, 2) + b"{}")
        status, _ = _status(again)
        assert status == 202 and len(proxy.captured) == 1
        again.close()
        assert any("connections at once" in r.message for r in proxy.refused)
    finally:
        proxy.close()


def _origin_server(close_each: bool):
    """A loopback HTTP server counting the connections it accepted; with `close_each`, it drops each
    connection after one answer without saying so (as an idle timeout does)."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    seen: list[int] = []

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *_: object) -> None:
            pass

        def setup(self) -> None:
            super().setup()
            seen.append(1)

        def do_GET(self) -> None:  # noqa: N802
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")
            self.close_connection = close_each

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, seen


def _get_twice(tmp_path: Path, close_each: bool) -> tuple[list[int], HttpProxy]:
    import urllib.request

    server, seen = _origin_server(close_each)
    port = server.server_address[1]
    store = Store.init(tmp_path)
    store.fork("v")
    proxy = HttpProxy(store.repo, "v", allow=[f"127.0.0.1:{port}"])
    proxy.start(Launch())
    try:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({"http": proxy.url}))
        for _ in range(2):
            assert opener.open(f"http://127.0.0.1:{port}/x", timeout=10).read() == b"ok"
    finally:
        proxy.close()
        server.shutdown()
        server.server_close()
    return seen, proxy


def test_passed_reads_reuse_the_upstream_connection(tmp_path: Path) -> None:
    seen, proxy = _get_twice(tmp_path, close_each=False)
    assert len(seen) == 1 and proxy.refused == [] and len(proxy.passed) == 2


def test_a_kept_connection_the_host_dropped_is_replaced(tmp_path: Path) -> None:
    seen, proxy = _get_twice(tmp_path, close_each=True)
    assert len(seen) == 2 and proxy.refused == [] and len(proxy.passed) == 2


def test_the_address_the_engine_reaches_is_judged_before_a_byte_is_sent(tmp_path: Path) -> None:
    """DNS rebinding: a name `decide` saw resolve to a public address may resolve to this machine when the
    engine connects. The engine asks the Policy about the address it really reached, before writing (a TLS
    hello included): a local one not named with --allow is refused and gets no byte."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    port = listener.getsockname()[1]
    got: list[bytes] = []

    def serve() -> None:
        for _ in range(2):
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            conn.settimeout(0.5)
            try:
                got.append(conn.recv(1024))
            except OSError:
                got.append(b"")
            conn.close()

    server = threading.Thread(target=serve, daemon=True)
    server.start()
    url = f"https://127.0.0.1:{port}/admin"
    req = Request("GET", url, "127.0.0.1", port, [("Host", f"127.0.0.1:{port}")], b"", "1.1")
    proxy, engine = _proxy(tmp_path)
    try:
        with pytest.raises(OSError, match="on this machine; nothing was sent"):
            engine._open(req)
        assert any("resolved to 127.0.0.1, on this machine" in r.message for r in proxy.refused)
        allowed = HttpProxy(proxy.repo, "v", allow=[f"127.0.0.1:{port}"])
        engine.policy = allowed
        plain = Request("GET", url.replace("https:", "http:"), "127.0.0.1", port, req.headers, b"", "1.1")
        engine._open(plain).close()  # named with --allow: the same address is reached
    finally:
        proxy.close()
        listener.close()
        server.join(timeout=5)
    assert got == [b"", b""], "neither connection got a byte from _open: not even a TLS hello when refused"
