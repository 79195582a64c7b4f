"""`HttpRequest`: the http adapter's operation as a typed value, so Python callers need not know its keys.

    v.effect("http", HttpRequest("POST", "https://api.example.com/pay", json={"amount": 500}))

Every key of the op map (docs/effects.md, "The http operation") is a field here; `to_op()` gives the
map `reel effect --op` takes. Secrets go in as references (`{"$secret": "name"}`), never as values.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class HttpRequest:
    method: str
    """An upper-case HTTP method. GET, HEAD and OPTIONS are reads; anything else is an effect."""
    url: str
    """An absolute http:// or https:// URL."""
    headers: Mapping[str, Any] = field(default_factory=dict)
    """Header names to values (strings, or secret references)."""
    json: Any = None
    """A JSON body (sent canonically: sorted keys, no spaces, `application/json`)."""
    body: str | bytes | None = None
    """A raw body instead of `json`: text (UTF-8, `text/plain`) or bytes (`application/octet-stream`)."""
    etag: str | None = None
    """Makes the request Class B: the resource's ETag the caller saw; sent as If-Match and re-checked
    at commit (E002 if it moved)."""

    def __post_init__(self) -> None:
        if self.json is not None and self.body is not None:
            raise ValueError("HttpRequest: give json or body, not both")

    def to_op(self) -> dict[str, Any]:
        op: dict[str, Any] = {"method": self.method, "url": self.url}
        if self.headers:
            op["headers"] = dict(self.headers)
        if self.json is not None:
            op["json"] = self.json
        if self.body is not None:
            op["body"] = self.body
        if self.etag is not None:
            op["etag"] = self.etag
        return op
