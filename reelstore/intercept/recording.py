"""Record and replay a dry run's reads (KEEL: make the run deterministic by recording it).

`RecordingProxy` is `reel run`'s proxy that also keeps every response a real host gave a passed-through
request; when the command exits, the exchanges become a `recording` object of the view. `ReplayProxy`
answers the command's reads from such a recording only, in order, and never goes to the network
(unless `allow_live`). A read the recording does not hold at that point is a divergence: reported with
the nearest recorded request, answered 599 and making the run unclean. Unsafe requests are captured
into the replay's own view exactly as in `reel run`.

A request's fingerprint is the SHA-256 of its method, its URL (secret parameters hidden), the
headers that select a representation (Accept, Accept-Language, Content-Type, Range) and a digest
of its body. Responses are kept without hop-by-hop headers and without credentials (Set-Cookie and
the configured secret headers).
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from reelstore.capture import HOP_BY_HOP
from reelstore.codec import freeze
from reelstore.errors import BadInput, NotFound
from reelstore.intercept.engine import Answer, Request
from reelstore.intercept.http_proxy import HttpProxy
from reelstore.kernel import verbs as kernel
from reelstore.objects import Blob, Hash, Record, Recording, View
from reelstore.storage.repo import Repo
from reelstore.storage.secrets import hide_params, sensitive_headers, sensitive_params
from reelstore.storage.service_rules import SAFE_METHODS
from reelstore.wording import plural

SELECTING = ("accept", "accept-language", "content-type", "range")
DIVERGED = 599
"""The status a replay answers a read it cannot serve from the recording (no real server uses it)."""


def fingerprint(method: str, url: str, headers: Iterable[tuple[str, str]], body: bytes) -> str:
    picked = sorted((k.lower(), v) for k, v in headers if k.lower() in SELECTING)
    doc = {"method": method.upper(), "url": url, "headers": picked, "body": hashlib.sha256(body).hexdigest()}
    return hashlib.sha256(json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def env_digest(env: dict[str, str]) -> str:
    """A digest of the command's environment: enough to tell that two runs' environments differ."""
    return hashlib.sha256(json.dumps(sorted(env.items())).encode()).hexdigest()


class RecordingProxy(HttpProxy):
    """`reel run --record`: the proxy, plus every passed-through exchange kept for the view."""

    def __init__(self, repo: Repo, view: str, allow: Iterable[str] = ()) -> None:
        super().__init__(repo, view, allow)
        self.exchanges: list[tuple[dict[str, Any], Blob]] = []
        self.started = int(time.time() * 1000)
        self._rec_lock = threading.Lock()
        self._params = sensitive_params(repo.config)
        self._hidden = sensitive_headers(repo.config) | {"set-cookie"} | HOP_BY_HOP

    def passed_through(self, req: Request, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
        super().passed_through(req, status, headers, body)
        url = hide_params(req.url, self._params)
        blob = Blob(body)
        entry = {"fp": fingerprint(req.method, url, req.headers, req.body), "method": req.method, "url": url,
                 "status": status, "headers": {k.lower(): v for k, v in headers if k.lower() not in self._hidden},
                 "body": blob.id}
        with self._rec_lock:
            self.exchanges.append((entry, blob))

    def finish(self) -> None:
        super().finish()
        with self._rec_lock:
            entries = tuple(freeze(e) for e, _ in self.exchanges)
            bodies = list({b.id: b for _, b in self.exchanges}.values())
        recording = Recording(entries, self.started, env_digest(dict(os.environ)))
        kernel.attach_recording(self.repo, self.view, recording, bodies)
        self.notes.append(f"recorded {plural(len(entries), 'read')} as {recording.id.hex()[:12]}")


@dataclass
class Divergence:
    index: int
    """Position in the replayed sequence of reads."""
    method: str
    url: str
    expected: dict[str, str] | None
    """The recorded request that was due here (None: the recording was used up)."""
    nearest: dict[str, str] | None
    diff: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "method": self.method, "url": self.url, "expected": self.expected,
                "nearest": self.nearest, "diff": self.diff}


@dataclass
class _Cursor:
    position: int = 0
    divergences: list[Divergence] = field(default_factory=list)


class ReplayProxy(HttpProxy):
    """`reel replay`: reads answered from `recording`, in order; nothing passes to the network unless
    `allow_live`, and every divergence is reported."""

    def __init__(self, repo: Repo, view: str, recording: Recording, allow: Iterable[str] = (),
                 allow_live: bool = False) -> None:
        super().__init__(repo, view, allow)
        self.recording = recording
        self.allow_live = allow_live
        self.cursor = _Cursor()
        self.served = 0
        self._params = sensitive_params(repo.config)

    @property
    def divergences(self) -> list[Divergence]:
        return self.cursor.divergences

    def decide(self, req: Request) -> Answer | None:
        if req.method not in SAFE_METHODS:
            return super().decide(req)
        url = hide_params(req.url, self._params)
        fp = fingerprint(req.method, url, req.headers, req.body)
        with self._lock:
            entries = self.recording.entries
            at = self.cursor.position
            if at < len(entries) and entries[at]["fp"] == fp:
                self.cursor.position += 1
                self.served += 1
                return self._answer(entries[at])
            found = self._divergence(at, req.method, url)
            self.cursor.divergences.append(found)
        what = f"{req.method} {url}"
        message = (f"replay diverged at read {found.index}: {what} is not the recording's next read"
                   + (f" (expected {found.expected['method']} {found.expected['url']})" if found.expected else
                      " (the recording has no more reads)"))
        if self.allow_live:
            self.notes.append(message + "; fetched live (--allow-live)")
            return None
        self.failed(what, message)
        return Answer(DIVERGED, json.dumps({"reel": "divergence", **found.to_json()}).encode(),
                      [("Content-Type", "application/json")])

    def _answer(self, entry: Any) -> Answer:
        body = self.repo.objects.get_as(Hash(bytes(entry["body"])), Blob).data
        headers = [(k, str(v)) for k, v in entry["headers"].items() if k != "content-length"]
        return Answer(int(entry["status"]), body, headers)

    def _divergence(self, at: int, method: str, url: str) -> Divergence:
        entries = self.recording.entries
        expected = ({"method": entries[at]["method"], "url": entries[at]["url"]} if at < len(entries) else None)
        wanted = f"{method} {url}"
        candidates = [f"{e['method']} {e['url']}" for e in entries]
        close = difflib.get_close_matches(wanted, candidates, n=1, cutoff=0.0)
        nearest = None
        diff = ""
        if close:
            m, _, u = close[0].partition(" ")
            nearest = {"method": m, "url": u}
            diff = "\n".join(difflib.unified_diff([close[0]], [wanted], "recorded", "replayed", lineterm=""))
        return Divergence(at, method, url, expected, nearest, diff)


def recording_of(repo: Repo, name: str) -> tuple[Recording, View, str]:
    """The recording of a live view, or of the view a record committed: (recording, view object, the
    trunk the view came from)."""
    ref = repo.ref_name(name)
    h = repo.refs[ref] if ref else repo.resolve(name)
    obj = repo.objects.get(h)
    if isinstance(obj, Record):
        if obj.view is None:
            raise NotFound(f"record {h.hex()[:12]} commits no view, so it has no recording")
        obj = repo.objects.get(obj.view)
    if not isinstance(obj, View):
        raise BadInput(f"{name} is a {obj.kind}; replay takes a view or a record")
    if obj.recording is None:
        raise NotFound(f"{name} has no recording: run it with `reel run --record`")
    return repo.objects.get_as(obj.recording, Recording), obj, str(obj.meta.get("trunk", "")) or repo.trunk
