"""The http adapter's kept-alive connections, one set per open store: a drain of many requests to one
host opens one TCP connection (and one TLS session), and so does the next drain in the same process.

A connection goes back to the pool only after an answer read to its end that did not ask to close;
anything else (an error, a truncated read, `Connection: close`, HTTP/1.0) closes it. Before reuse it
is checked once more: an idle socket the peer closed (or wrote to unasked) is dropped, and the request
connects afresh, so a failed connect is still `not_sent` exactly as on a fresh connection. What is
left is the peer closing between that check and the request: the request may then be lost, which the
adapter reports as `unknown`, never as `not_sent`.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from urllib3.connection import HTTPConnection

if TYPE_CHECKING:
    from reelstore.backend.repo import Repo

Key = tuple[str, str, int, str]
"""(scheme, host, port, what the TLS context trusts): connections are shared only under one key."""

IDLE_PER_KEY = 4
"""Idle connections kept per key (one per concurrent drain to that host, up to this many)."""


class Pool:
    """Idle connections by key; a connection is held by one request at a time."""

    def __init__(self) -> None:
        self._idle: dict[Key, list[HTTPConnection]] = {}
        self._lock = threading.Lock()

    def take(self, key: Key) -> HTTPConnection | None:
        """An idle connection to `key` still open at both ends, or None (then connect a new one)."""
        while True:
            with self._lock:
                idle = self._idle.get(key)
                if not idle:
                    return None
                conn = idle.pop()
            if conn.is_connected:
                return conn
            conn.close()

    def give(self, key: Key, conn: HTTPConnection) -> None:
        """Keep `conn` for the next request to `key` (closed instead if enough are kept)."""
        with self._lock:
            idle = self._idle.setdefault(key, [])
            if len(idle) < IDLE_PER_KEY:
                idle.append(conn)
                return
        conn.close()


def pool(repo: Repo) -> Pool:
    """The store handle's pool (built on first use)."""
    return repo.attached(_new)


def _new(_repo: Repo) -> Pool:
    return Pool()
