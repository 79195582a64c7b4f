"""A real HTTPS model server on 127.0.0.1 with its own CA, speaking OpenAI's chat-completions shape,
and a refund endpoint: the two things an LLM agent under `reel run` talks to.

`POST /v1/messages` answers the same in Anthropic's Messages shape (streamed as its events).
`POST /v1/chat/completions` answers `REFUND <amount>` (the server's `amount`) with `usage` counts;
with `"stream": true` it answers server-sent events, chunked, holding back the rest after the first
content event (until the client creates the `gate` file, for at most 5 s: so a
proxy that buffered the stream shows as a client that never saw the first event in time), then a
usage event and `[DONE]`. `POST /refund` answers 201.
Every request is appended to a JSON-lines ledger (path, headers, body) before it is answered: the
oracle for "the model saw each call once" and "the refund reached nobody".
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path

from loopback_server import LoopbackServer
from tls_target import make_ca


class ModelServer(LoopbackServer):
    def __init__(
        self,
        directory: Path,
        amount: int = 5,
        gate: Path | None = None,
        port: int = 0,
        tls: bool = True,
        hold: float = 0.0,
    ) -> None:
        self.ca, cert, key = make_ca(directory)
        self.amount = amount
        self.gate = gate
        self.hold = hold
        """Without a gate: seconds the rest of a stream is held back after its first event."""
        self.gated: list[bool] = []
        """Per stream: did the client show it had the first event (by creating `gate`) before the rest was sent."""
        self.ledger_path = directory / "model-ledger.jsonl"
        self.ledger_path.touch()
        self.lock = threading.Lock()
        self._listen(_handler(self), port, (cert, key) if tls else None)

    def append(self, entry: dict) -> None:
        with self.lock, self.ledger_path.open("a") as f:
            f.write(json.dumps(entry) + "\n")


def _handler(server: ModelServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body are separate writes: no delayed-ACK stall

        def log_message(self, *_: object) -> None:
            pass

        def do_POST(self) -> None:  # noqa: N802
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            server.append(
                {
                    "path": self.path,
                    "body": body.decode("utf-8", "replace"),
                    "headers": {k.lower(): v for k, v in self.headers.items()},
                }
            )
            if self.path == "/v1/chat/completions":
                doc = json.loads(body)
                (self._stream if doc.get("stream") else self._plain)(doc)
                return
            if self.path == "/v1/messages":
                doc = json.loads(body)
                (self._message_stream if doc.get("stream") else self._message)(doc)
                return
            self._send(201, b'{"ok": true}')

        def _message(self, doc: dict) -> None:
            """Anthropic's Messages shape."""
            answer = {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": doc["model"],
                "content": [{"type": "text", "text": f"REFUND {server.amount}"}],
                "stop_reason": "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": 11, "output_tokens": 2},
            }
            self._send(200, json.dumps(answer).encode())

        def _message_stream(self, doc: dict) -> None:
            def event(kind: str, payload: dict) -> None:
                self._chunk(f"event: {kind}\ndata: {json.dumps({'type': kind, **payload})}\n\n".encode())

            self._open_stream()
            event(
                "message_start",
                {
                    "message": {
                        "id": "msg_2",
                        "type": "message",
                        "role": "assistant",
                        "model": doc["model"],
                        "content": [],
                        "stop_reason": None,
                        "stop_sequence": None,
                        "usage": {"input_tokens": 12, "output_tokens": 1},
                    }
                },
            )
            event("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}})
            event("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": "REFUND"}})
            self._hold()
            event("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": f" {server.amount}"}})
            event("content_block_stop", {"index": 0})
            event(
                "message_delta",
                {"delta": {"stop_reason": "end_turn", "stop_sequence": None}, "usage": {"output_tokens": 3}},
            )
            event("message_stop", {})
            self._chunk(b"")

        def _open_stream(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()

        def _chunk(self, data: bytes) -> None:
            """One chunk of a chunked answer, flushed (empty: the last one)."""
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

        def _hold(self) -> None:
            """After a stream's first content event: wait for the gate (or `hold` seconds)."""
            if server.gate is not None:
                for _ in range(100):
                    if server.gate.exists():
                        break
                    time.sleep(0.05)
                server.gated.append(server.gate.exists())
            elif server.hold:
                time.sleep(server.hold)

        def _send(self, status: int, data: bytes, ctype: str = "application/json") -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _plain(self, doc: dict) -> None:
            answer = {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "created": 1,
                "model": doc["model"],
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": f"REFUND {server.amount}"},
                    }
                ],
                "usage": {"prompt_tokens": 11, "completion_tokens": 2, "total_tokens": 13},
            }
            self._send(200, json.dumps(answer).encode())

        def _stream(self, doc: dict) -> None:
            def event(payload: object) -> None:
                self._chunk(f"data: {payload if isinstance(payload, str) else json.dumps(payload)}\n\n".encode())

            def chunk(delta: dict, finish: str | None = None) -> dict:
                return {
                    "id": "chatcmpl-2",
                    "object": "chat.completion.chunk",
                    "created": 1,
                    "model": doc["model"],
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
                }

            self._open_stream()
            event(chunk({"role": "assistant", "content": "REFUND"}))
            self._hold()
            event(chunk({"content": f" {server.amount}"}))
            event(chunk({}, "stop"))
            event(
                {
                    "id": "chatcmpl-2",
                    "object": "chat.completion.chunk",
                    "created": 1,
                    "model": doc["model"],
                    "choices": [],
                    "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15},
                }
            )
            event("[DONE]")
            self._chunk(b"")

    return Handler
