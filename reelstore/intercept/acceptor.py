"""A listening socket served by one accept thread, and a stop that really ends that thread.

Closing a socket does not wake a thread blocked in `accept()` on it: the thread stays blocked, and when
a signal interrupts the call (a child's exit is enough) the kernel restarts it on the same descriptor
number, which by then may belong to a listening socket opened later in the same process. The stale
thread then takes that socket's next connection and answers it as the stopped server would. `close()`
therefore shuts the socket down first, which ends a blocked `accept()` at once, waits for the thread,
and only then releases the descriptor.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable

JOIN_S = 5.0
"""How long `close()` waits for the accept thread (it ends as soon as the socket is shut down)."""


class Acceptor:
    """Accepts connections on `sock` in a thread named `name`, handing each to `handle` (which must not
    block: it starts the connection's own thread)."""

    def __init__(self, sock: socket.socket, handle: Callable[[socket.socket], object], name: str) -> None:
        self.sock = sock
        self._handle = handle
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:  # shut down by close() (or closed under it)
                return
            self._handle(conn)

    def close(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        if self._thread is not threading.current_thread():
            self._thread.join(JOIN_S)
        self.sock.close()
