"""A `requests` transport adapter that captures, for programs written against `requests`.

session = requests_session(view)
session.get("https://example.com/doc")                # sent at once
session.post("https://example.com/pay", json={...})   # 202: queued in the view until it is committed
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import requests
from requests.adapters import HTTPAdapter
from requests.structures import CaseInsensitiveDict

from reelstore.capture import end_to_end, http_op, passes, pending, refused, serial
from reelstore.errors import ReelError

if TYPE_CHECKING:
    from reelstore.api import ViewHandle


class CaptureAdapter(HTTPAdapter):
    """Read-like requests go out through `HTTPAdapter`; the rest are admitted into the view."""

    def __init__(self, view: ViewHandle, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.handle = view
        self.passed: list[dict[str, Any]] = []
        self.captured: list[dict[str, Any]] = []

    def send(
        self, request: requests.PreparedRequest, stream: bool = False, *args: Any, **kwargs: Any
    ) -> requests.Response:
        """What `HTTPAdapter.send` does for a read-like request; a 202 (or the refusal) for any other."""
        method, url = request.method or "GET", request.url or ""
        if passes(self.handle.repo.config, method, url):
            response = super().send(request, stream, *args, **kwargs)
            self.passed.append({"method": method, "url": url, "status": response.status_code})
            return response
        body = request.body or b""
        if hasattr(body, "read"):  # a file: requests would stream it
            body = body.read()
        elif not isinstance(body, (bytes, str)):  # a generator of pieces
            body = b"".join(c if isinstance(c, bytes) else c.encode("utf-8") for c in body)
        headers = [(k, v if isinstance(v, str) else v.decode("latin-1")) for k, v in request.headers.items()]
        op = http_op(method, url, end_to_end(headers), body.encode("utf-8") if isinstance(body, str) else body)
        try:
            with serial(self.handle):
                made = self.handle.effect("http", op)
        except ReelError as err:
            return _answer(request, *refused(self.handle.name, err))
        self.captured.append({"method": method, "url": url, "effect": made.id.hex()})
        return _answer(request, 202, pending(self.handle.name, made), {"Reel-Effect": made.id.hex()})


def _answer(
    request: requests.PreparedRequest, status: int, doc: dict[str, Any], headers: dict[str, str] | None = None
) -> requests.Response:
    response = requests.Response()
    response.status_code = status
    response.reason = "Accepted" if status == 202 else "Refused"
    response.headers = CaseInsensitiveDict({"Content-Type": "application/json", **(headers or {})})
    response._content = (json.dumps(doc, sort_keys=True) + "\n").encode("utf-8")
    response.encoding = "utf-8"
    response.url = request.url or ""
    response.request = request
    return response


def requests_session(view: ViewHandle) -> requests.Session:
    """A `requests.Session` whose http and https requests all go through a `CaptureAdapter` on `view`."""
    session = requests.Session()
    adapter = CaptureAdapter(view)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session
