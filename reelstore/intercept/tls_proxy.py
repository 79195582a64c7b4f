"""The engine behind `reel run`'s proxy: HTTP/1.1 through h11, TLS through the standard `ssl` module,
leaf certificates from the store's local CA (`ca.LeafMinter`).

h11 does the protocol work — request framing, Content-Length and chunked bodies, keep-alive,
`Expect: 100-continue`, CONNECT and Upgrade handshakes — so this module is only the socket loop: a
thread per client connection, each request turned into an `engine.Request` and put to the Policy.

- Absolute-form requests (`GET http://h/x`) are plain-HTTP proxying.
- `CONNECT host:port` opens a tunnel; if the client then starts TLS, it is terminated with a leaf
  certificate for the host (the SNI name when there is one) and the requests inside are `https://`
  URLs; plain HTTP inside a tunnel is read the same way; anything else (raw TCP) is refused.
- HTTP/2 is not offered: ALPN advertises `http/1.1` only, which every client falls back to.
- A WebSocket upgrade is refused (501) and reported; other `Upgrade` offers are simply not taken up.
- A pass-through request is sent upstream over TLS verified against the bundle it is given (the
  system trust store plus `http.trust`), on a connection kept per origin for the run (a few at most;
  a kept one the host closed is replaced, which is safe since only reads pass), and its answer
  relayed as it arrives:
  each piece the host sends (a server-sent event, a chunk) is written to the command at once, so a
  model's first token reaches the agent before the model has finished.

Memory is bounded: at most `max_connections` client connections at once (one more is answered 503
and closed), each request body at most `BODY_LIMIT`, and all request bodies being read, plus the
copies of answers a recording policy keeps, at most `budget` bytes together; a request that would
go over is answered 413 and reported, and an answer over it is relayed but not kept.

Nothing reaches a host unless the Policy passes the request: no connection is opened upstream for a
CONNECT, only for a request that passes. Every failure inside the engine answers the command with an
error and reports through `Policy.failed`; none forwards anything.
"""

from __future__ import annotations

import http.client
import socket
import ssl
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import h11

from reelstore.intercept.acceptor import Acceptor
from reelstore.intercept.ca import LeafMinter
from reelstore.intercept.engine import BODY_LIMIT, BUFFER_BUDGET, MAX_CONNECTIONS, Answer, Policy, Request, Timing

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
        "content-length",
    )
)
IDLE_TIMEOUT = 120.0
UPSTREAM_TIMEOUT = 600.0
"""Seconds a passed request may wait for its host between bytes: a model can think for minutes before
its first token (the model SDKs wait 10 minutes too)."""
CHUNK = 64 * 1024
DEFAULT_PORTS = {"http": 80, "https": 443}
POOL_PER_ORIGIN = 8
"""Idle upstream connections kept per origin (scheme, host, port) while the run lasts."""


class _Refused(OSError):  # noqa: N818
    """The Policy refused the address a connection reached; nothing was written to it."""


class _Closed(Exception):  # noqa: N818
    """The client went away or sent something h11 could not parse; the connection ends."""


class TlsProxy:
    """The engine: `start()` listens on 127.0.0.1 and returns the port; `stop()` ends every connection."""

    def __init__(
        self,
        policy: Policy,
        minter: LeafMinter,
        upstream_ca: Path | None,
        max_connections: int = MAX_CONNECTIONS,
        budget: int = BUFFER_BUDGET,
    ) -> None:
        self.policy = policy
        self.minter = minter
        self.upstream = ssl.create_default_context(cafile=str(upstream_ca) if upstream_ca else None)
        self.upstream.set_alpn_protocols(["http/1.1"])
        self.max_connections = max_connections
        self.budget = budget
        self.buffered = 0
        """Bytes of bodies held in memory right now, across every connection."""
        self._listener: Acceptor | None = None
        self._conns: set[socket.socket] = set()
        self._pool: dict[tuple[str, str, int | None], list[http.client.HTTPConnection]] = {}
        """Upstream connections kept open per origin: a model call does not pay a TLS handshake each time."""
        self._lock = threading.Lock()

    def start(self) -> int:
        self._listener = Acceptor(socket.create_server(("127.0.0.1", 0), backlog=128), self._accepted, "reel-run-proxy")
        return int(self._listener.sock.getsockname()[1])

    def stop(self) -> None:
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        with self._lock:
            conns, self._conns = self._conns, set()
            pooled, self._pool = self._pool, {}
        for up in (c for kept in pooled.values() for c in kept):
            up.close()
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _accepted(self, conn: socket.socket) -> None:
        with self._lock:
            full = len(self._conns) >= self.max_connections
            if not full:
                self._conns.add(conn)
        if full:
            self.policy.failed(
                "CONNECT",
                f"over {self.max_connections} connections at once; this one was "
                f"answered 503 and nothing it asked was sent",
            )
            try:
                conn.sendall(b"HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
            except OSError:
                pass
            conn.close()
            return
        threading.Thread(target=self._client, args=(conn,), daemon=True).start()

    def _reserve(self, size: int) -> bool:
        """Count `size` more bytes against the budget; False (nothing counted) if that would exceed it."""
        with self._lock:
            if self.buffered + size > self.budget:
                return False
            self.buffered += size
            return True

    def _release(self, size: int) -> None:
        with self._lock:
            self.buffered -= size

    def _client(self, sock: socket.socket) -> None:
        try:
            # An answer's head and body are separate writes: without this, Nagle's algorithm holds the
            # body until the client's delayed ACK (~40 ms a call).
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.settimeout(IDLE_TIMEOUT)
            self._http(sock, None, None)
        except (OSError, _Closed):
            pass
        finally:
            with self._lock:
                self._conns.discard(sock)
            sock.close()

    # HTTP/1.1 over one connection (the proxy's own, or inside a tunnel).

    def _http(self, sock: socket.socket, scheme: str | None, authority: tuple[str, int] | None) -> None:
        conn = h11.Connection(h11.SERVER)
        while True:
            event = _next(sock, conn)
            if not isinstance(event, h11.Request):
                return
            method = event.method.decode("ascii")
            target = event.target.decode("latin-1")
            headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in _raw(event.headers)]
            if method == "CONNECT" and scheme is None:
                self._connect(sock, conn, target)
                return
            if conn.they_are_waiting_for_100_continue:
                sock.sendall(conn.send(h11.InformationalResponse(status_code=100, headers=[])))
            body, held = self._body(sock, conn)
            try:
                if body is None:
                    why = (
                        f"a request body over {BODY_LIMIT} bytes"
                        if held < 0
                        else f"request bodies over {self.budget} bytes held at once"
                    )
                    self.policy.failed(f"{method} {target}", f"{why}; nothing was sent")
                    _answer(sock, conn, Answer(413, f"reel run: {why}; nothing was sent\n".encode()), method)
                    return
                req = _request(method, target, headers, body, scheme, authority, event.http_version.decode())
                if req is None:
                    self.policy.failed(f"{method} {target}", "not a proxy request (absolute http:// URL or CONNECT)")
                    _answer(
                        sock, conn, Answer(400, b"reel run's proxy needs an absolute http:// URL or CONNECT\n"), method
                    )
                    return
                answer = self._decide(req)
                if answer is None:
                    self._relay(sock, conn, req)
                else:
                    _answer(sock, conn, answer, method)
            finally:
                self._release(max(held, 0))
            if conn.our_state is h11.MUST_CLOSE or conn.their_state is h11.MUST_CLOSE:
                return
            try:
                conn.start_next_cycle()
            except h11.LocalProtocolError:
                return

    def _decide(self, req: Request) -> Answer | None:
        """Ask the Policy (None: pass the request through); fail closed if it raises."""
        what = f"{req.method} {req.url}"
        try:
            if any(k.lower() == "upgrade" and "websocket" in v.lower() for k, v in req.headers):
                self.policy.failed(
                    f"WEBSOCKET {req.url}",
                    "WebSocket upgrades are refused: their messages cannot "
                    "be held as pending effects. Nothing was sent",
                )
                return Answer(
                    501,
                    b'{"reel": "refused", "message": "reel run refuses WebSocket upgrades; nothing was sent"}\n',
                    [("Content-Type", "application/json")],
                )
            return self.policy.decide(req)
        except Exception as exc:  # noqa: BLE001  (any failure must stop the request, not let it pass)
            self.policy.failed(what, f"the proxy could not decide ({exc!r}); nothing was sent")
            return Answer(500, b"reel run failed to intercept this request; nothing was sent\n")

    def _relay(self, sock: socket.socket, conn: h11.Connection, req: Request) -> None:
        """Send a passed request to its host and relay the answer piece by piece as it arrives (a
        stream's first event reaches the command before the host has finished); the Policy then gets
        the exchange, with the body if it keeps bodies and the body fit the budget."""
        what = f"{req.method} {req.url}"
        began = time.monotonic()
        try:
            upstream, reused = self._take(req)
        except _Refused as exc:
            _answer(sock, conn, Answer(403, f"reel run refused {req.url}: {exc}\n".encode()), req.method)
            return
        except (OSError, ValueError) as exc:
            self.policy.failed(what, f"the pass-through read failed: {exc}")
            _answer(sock, conn, Answer(502, f"reel run could not fetch {req.url}: {exc}\n".encode()), req.method)
            return
        reusable = False
        try:
            try:
                try:
                    resp = self._send(upstream, req)
                except (OSError, http.client.HTTPException):
                    if not reused:
                        raise
                    # A kept connection the host had closed meanwhile; only reads are passed, so resending
                    # on a fresh one is safe.
                    upstream.close()
                    upstream = self._open(req)
                    resp = self._send(upstream, req)
            except (OSError, http.client.HTTPException, ValueError) as exc:
                self.policy.failed(what, f"the pass-through read failed: {exc}")
                _answer(sock, conn, Answer(502, f"reel run could not fetch {req.url}: {exc}\n".encode()), req.method)
                return
            first: float | None = None
            headers = [(k, v) for k, v in resp.getheaders() if k.lower() not in HOP_BY_HOP]
            length = resp.getheader("Content-Length")
            if length is not None and not resp.chunked and length.isdigit():
                headers.append(("Content-Length", length))
            try:
                # The head goes out with the first piece of the body: one write, which a relay on the way
                # (the sandbox's) passes on whole instead of holding its second half for an ACK.
                head = conn.send(h11.Response(status_code=resp.status, headers=headers))
            except h11.LocalProtocolError as exc:
                raise _Closed(str(exc)) from None
            keep = self.policy.keeps_bodies
            kept: list[bytes] = []
            held = 0
            relayed = 0
            told = False
            expected = int(length) if length is not None and not resp.chunked and length.isdigit() else None

            def tell() -> None:
                """The host's answer is all in: its connection goes back to the pool, and the Policy hears of
                the exchange, both before the command has the whole answer (a command that exits on its last
                byte cannot end the run before its read is recorded; its next request finds the connection)."""
                nonlocal reusable
                done = time.monotonic()
                resp.close()
                reusable = not resp.will_close
                if reusable:
                    self._give(req, upstream)
                self.policy.passed_through(
                    req,
                    resp.status,
                    headers,
                    b"".join(kept) if keep else None,
                    Timing((done - began) * 1000, ((first or done) - began) * 1000),
                )

            try:
                for _ in range(1 << 30):
                    try:
                        piece = resp.read1(CHUNK) if req.method != "HEAD" else b""
                    except (OSError, http.client.HTTPException) as exc:
                        self.policy.failed(what, f"the host's answer broke off after {relayed} bytes: {exc}")
                        raise _Closed(str(exc)) from None
                    if not piece:
                        break
                    if first is None:
                        first = time.monotonic()
                    if keep and self._reserve(len(piece)):
                        held += len(piece)
                        kept.append(piece)
                    elif keep:
                        keep = False
                        self._release(held)
                        kept, held = [], 0
                    if expected is not None and relayed + len(piece) >= expected and not told:
                        tell()  # this piece completes an answer framed by its length
                        told = True
                    try:
                        sock.sendall(head + conn.send(h11.Data(data=piece)))
                    except h11.LocalProtocolError as exc:
                        raise _Closed(str(exc)) from None
                    head = b""
                    relayed += len(piece)
                if not told:
                    tell()
                sock.sendall(head + conn.send(h11.EndOfMessage()))
            finally:
                self._release(held)
        finally:
            if not reusable:
                upstream.close()

    def _take(self, req: Request) -> tuple[http.client.HTTPConnection, bool]:
        """A kept connection to the request's origin (True), else a new one (False)."""
        with self._lock:
            kept = self._pool.get(_origin(req))
            if kept:
                return kept.pop(), True
        return self._open(req), False

    def _give(self, req: Request, upstream: http.client.HTTPConnection) -> None:
        """Keep a connection whose answer was read to its end, for the origin's next request."""
        with self._lock:
            kept = self._pool.setdefault(_origin(req), [])
            if len(kept) < POOL_PER_ORIGIN and self._listener is not None:
                kept.append(upstream)
                return
        upstream.close()

    def _open(self, req: Request) -> http.client.HTTPConnection:
        """A new connection to the request's host, connected here so the Policy judges the address it
        really reached before anything (a TLS hello included) is written to it."""
        parts = urlsplit(req.url)
        host = parts.hostname or ""
        https = parts.scheme == "https"
        port = parts.port or (443 if https else 80)
        raw = socket.create_connection((host, port), timeout=UPSTREAM_TIMEOUT)
        try:
            address = str(raw.getpeername()[0])
            if not self.policy.reaches(req, address):
                raise _Refused(f"{host} resolved to {address}, on this machine; nothing was sent")
            upstream: http.client.HTTPConnection
            if https:
                upstream = http.client.HTTPSConnection(host, port, timeout=UPSTREAM_TIMEOUT, context=self.upstream)
                upstream.sock = self.upstream.wrap_socket(raw, server_hostname=host)
            else:
                upstream = http.client.HTTPConnection(host, port, timeout=UPSTREAM_TIMEOUT)
                upstream.sock = raw
        except BaseException:
            raw.close()
            raise
        return upstream

    def _send(self, upstream: http.client.HTTPConnection, req: Request) -> http.client.HTTPResponse:
        parts = urlsplit(req.url)
        upstream.putrequest(
            req.method, (parts.path or "/") + (f"?{parts.query}" if parts.query else ""), skip_accept_encoding=True
        )
        for k, v in req.headers:
            if k.lower() not in HOP_BY_HOP and k.lower() != "host":
                upstream.putheader(k, v)
        if req.body or req.method not in ("GET", "HEAD", "OPTIONS", "TRACE"):
            upstream.putheader("Content-Length", str(len(req.body)))
        upstream.endheaders(req.body or None)
        return upstream.getresponse()

    def _body(self, sock: socket.socket, conn: h11.Connection) -> tuple[bytes | None, int]:
        """The request's whole body (h11 de-chunks it) and the bytes it holds against the budget; None
        with -1 if it is over `BODY_LIMIT`, None with 0 if the budget is spent (nothing stays counted)."""
        parts: list[bytes] = []
        size = 0
        while True:
            event = _next(sock, conn)
            if isinstance(event, h11.Data):
                if size + len(event.data) > BODY_LIMIT:
                    self._release(size)
                    return None, -1
                if not self._reserve(len(event.data)):
                    self._release(size)
                    return None, 0
                size += len(event.data)
                parts.append(bytes(event.data))
            elif isinstance(event, h11.EndOfMessage):
                return b"".join(parts), size
            else:
                self._release(size)
                raise _Closed(f"unexpected {event!r} in a request body")

    # Tunnels.

    def _connect(self, sock: socket.socket, conn: h11.Connection, target: str) -> None:
        host, port = _authority(target)
        if port is None:
            _answer(sock, conn, Answer(400, b"CONNECT needs host:port\n"), "CONNECT")
            return
        _next(sock, conn)  # the CONNECT's EndOfMessage
        sock.sendall(conn.send(h11.Response(status_code=200, headers=[], reason=b"Connection established")))
        early, _ = conn.trailing_data
        if early:
            self.policy.failed(f"CONNECT {target}", "data sent before the tunnel was established; refused")
            return
        first = sock.recv(1, socket.MSG_PEEK)
        if not first:
            return
        if first == b"\x16":
            self._tls(sock, host, port)
        elif first.isalpha():
            self._http(sock, "http", (host, port))
        else:
            self.policy.failed(
                f"TCP {host}:{port}", "a tunnel that is neither HTTP nor TLS is refused; nothing was sent"
            )

    def _tls(self, sock: socket.socket, host: str, port: int) -> None:
        ctx = self.minter.context(host)
        ctx.sni_callback = self._sni
        try:
            tls = ctx.wrap_socket(sock, server_side=True)
        except (ssl.SSLError, OSError) as exc:
            self.policy.failed(
                f"TLS {host}:{port}",
                f"the command refused the interception certificate ({exc}); "
                f"does it ignore the CA variables? Nothing was sent",
            )
            return
        try:
            self._http(tls, "https", (host, port))
        finally:
            try:
                tls.unwrap()
            except (ssl.SSLError, OSError, ValueError):
                pass

    def _sni(self, sslobj: ssl.SSLObject, name: str | None, ctx: ssl.SSLContext) -> None:
        if name:
            fresh = self.minter.context(name)
            fresh.sni_callback = self._sni
            sslobj.context = fresh


def _raw(headers: Any) -> list[tuple[bytes, bytes]]:
    """Header names with their original case (h11 lower-cases them in `headers`)."""
    return list(headers.raw_items())


def _next(sock: socket.socket, conn: h11.Connection) -> Any:
    for _ in range(1 << 20):
        try:
            event = conn.next_event()
        except h11.RemoteProtocolError as exc:
            raise _Closed(str(exc)) from None
        if event is not h11.NEED_DATA:
            return event
        conn.receive_data(sock.recv(CHUNK))
    raise _Closed("too many reads for one event")


def _request(
    method: str,
    target: str,
    headers: list[tuple[str, str]],
    body: bytes,
    scheme: str | None,
    authority: tuple[str, int] | None,
    version: str,
) -> Request | None:
    if scheme is None:
        parts = urlsplit(target)
        if parts.scheme != "http" or not parts.hostname:
            return None
        return Request(method, target, parts.hostname, parts.port or 80, headers, body, f"HTTP/{version}")
    assert authority is not None
    host, port = authority
    shown = f"[{host}]" if ":" in host else host
    netloc = shown if DEFAULT_PORTS[scheme] == port else f"{shown}:{port}"
    path = target if target.startswith("/") else "/" + target
    return Request(method, f"{scheme}://{netloc}{path}", host, port, headers, body, f"HTTP/{version}")


def _origin(req: Request) -> tuple[str, str, int | None]:
    parts = urlsplit(req.url)
    return parts.scheme, parts.hostname or "", parts.port


def _authority(target: str) -> tuple[str, int | None]:
    host, sep, port = target.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536 or not host:
        return target, None
    return host.strip("[]"), int(port)


def _answer(sock: socket.socket, conn: h11.Connection, answer: Answer, method: str) -> None:
    """Send `answer`: whole, with its length, or (`answer.chunks`) piece by piece, as a stream is."""
    no_body = method == "HEAD" or answer.status in (204, 304) or 100 <= answer.status < 200
    headers = [(k, v) for k, v in answer.headers if k.lower() not in HOP_BY_HOP]
    if answer.status not in (204, 304) and not 100 <= answer.status < 200 and not answer.chunks:
        length = next((v for k, v in answer.headers if k.lower() == "content-length"), None)
        headers.append(("Content-Length", length if method == "HEAD" and length else str(len(answer.body))))
    try:
        out = conn.send(h11.Response(status_code=answer.status, headers=headers))
        for piece in () if no_body else answer.chunks or (answer.body,):
            if piece:
                sock.sendall(out + conn.send(h11.Data(data=piece)))
                out = b""
        sock.sendall(out + conn.send(h11.EndOfMessage()))
    except h11.LocalProtocolError as exc:
        raise _Closed(str(exc)) from None
