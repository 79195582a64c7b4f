"""Loopback ports a test names before anything listens on them.

A port found free and then released (bind to port 0, close) can be taken by any other process on the
machine before the test uses it: other suites run beside this one, and a request meant for "nothing
listening" would reach their server, or a server started on that port would fail while a probe of the
port reached theirs. A reservation keeps the port bound but not listening for as long as the test
needs it: connecting is refused, `bind` to port 0 anywhere else never picks it, and a test server that
asks for it by number with SO_REUSEADDR (every server the tests start does) can still listen on it.
"""

from __future__ import annotations

import socket


class Reserved:
    """A loopback port held, not listening, until `close()`."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.port: int = self.sock.getsockname()[1]

    def close(self) -> None:
        self.sock.close()
