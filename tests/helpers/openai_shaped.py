"""A loopback server shaped like the OpenAI and Anthropic APIs: POST /v1/chat/completions and POST
/v1/messages answer a fixed reply; any other POST is recorded in `acted` (the ledger a test checks),
answered 201."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

REPLY = "the refund is due"


class ModelServer:
    def __init__(self) -> None:
        self.acted: list[tuple[str, dict]] = []
        self.chats = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_: object) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                if self.path == "/v1/chat/completions":
                    server.chats += 1
                    doc = {
                        "id": "c1",
                        "object": "chat.completion",
                        "created": 0,
                        "model": body["model"],
                        "choices": [
                            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": REPLY}}
                        ],
                    }
                    status = 200
                elif self.path == "/v1/messages":
                    server.chats += 1
                    doc = {
                        "id": "m1",
                        "type": "message",
                        "role": "assistant",
                        "model": body["model"],
                        "content": [{"type": "text", "text": REPLY}],
                        "stop_reason": "end_turn",
                        "stop_sequence": None,
                        "usage": {"input_tokens": 1, "output_tokens": 1},
                    }
                    status = 200
                else:
                    server.acted.append((self.path, body))
                    doc, status = {"ok": True}, 201
                raw = json.dumps(doc).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> ModelServer:
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *_: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
