"""What the tests' loopback targets share: a threaded HTTP(S) server on 127.0.0.1, started and stopped
as a context manager, and the JSON-lines ledger each writes every request into before answering."""

from __future__ import annotations

import json
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Self


class LoopbackServer:
    ledger_path: Path

    def _listen(
        self, handler: type[BaseHTTPRequestHandler], port: int = 0, tls: tuple[Path, Path] | None = None
    ) -> None:
        """Bind on 127.0.0.1 (`port` 0: any free one); with `tls` (certificate, key), speak HTTPS."""
        self.server = ThreadingHTTPServer(("127.0.0.1", port), handler)
        self.server.daemon_threads = True
        self.scheme = "http"
        if tls is not None:
            ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            ctx.load_cert_chain(*tls)
            self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True, do_handshake_on_connect=False)
            self.scheme = "https"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}"

    def __enter__(self) -> Self:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def ledger(self) -> list[dict]:
        return [json.loads(line) for line in self.ledger_path.read_text().splitlines() if line.strip()]
