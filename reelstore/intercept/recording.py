"""Record and replay a dry run's reads, so a second run sees what the first saw and can be compared.

`RecordingProxy` is `reel run`'s proxy that also keeps every response a real host gave a passed-through
request; when the command exits, the exchanges become a `recording` object of the view. `ReplayProxy`
answers the command's reads from such a recording only, in order, and never goes to the network
(unless `allow_live`). A read the recording does not hold at that point is a divergence: reported with
the nearest recorded request, answered 599 and making the run unclean. Unsafe requests are captured
into the replay's own view exactly as in `reel run`.

A request's fingerprint is the SHA-256 of its method, its URL (secret parameters hidden), the
headers that select a representation (Accept, Accept-Language, Content-Type, Range) and a digest
of its body. Responses are kept without hop-by-hop headers and without credentials (Set-Cookie and
the configured secret headers); request headers are never kept.

Model calls (`models`) are recorded the same way and also keep their own fingerprint (provider,
model, messages, tools, parameters), their canonical request, tokens and latency. A replay answers
them in order from the recording, a streamed one as the events it was recorded as, with no request
to the model; a call whose fingerprint differs is a divergence that shows the diff of its messages.
With `live_models` they go to the model instead, while other reads still come from the recording.
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
from urllib.parse import urlsplit

from reelstore.backend.repo import Repo
from reelstore.backend.secrets import hide_params, sensitive_headers, sensitive_params
from reelstore.backend.service_rules import SAFE_METHODS
from reelstore.capture import HOP_BY_HOP
from reelstore.codec import freeze
from reelstore.errors import BadInput, NotFound
from reelstore.intercept import models
from reelstore.intercept.engine import Answer, Request, Timing
from reelstore.intercept.http_proxy import QUERY_SECRETS, HttpProxy
from reelstore.kernel import verbs as kernel
from reelstore.objects import Blob, Hash, Record, Recording, View
from reelstore.wording import plural

SELECTING = ("accept", "accept-language", "content-type", "range")
DIVERGED = 599
"""The status a replay answers a read it cannot serve from the recording (no real server uses it)."""
MODEL_DIVERGED = 412
"""The status of a diverged model call: a client error, which model SDKs do not retry (they retry 5xx)."""


def fingerprint(method: str, url: str, headers: Iterable[tuple[str, str]], body: bytes) -> str:
    picked = sorted((k.lower(), v) for k, v in headers if k.lower() in SELECTING)
    doc = {"method": method.upper(), "url": url, "headers": picked, "body": hashlib.sha256(body).hexdigest()}
    return hashlib.sha256(json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def env_digest(env: dict[str, str]) -> str:
    """A digest of the command's environment: enough to tell that two runs' environments differ."""
    return hashlib.sha256(json.dumps(sorted(env.items())).encode()).hexdigest()


class RecordingProxy(HttpProxy):
    """`reel run --record`: the proxy, plus every passed-through exchange kept for the view."""

    keeps_bodies = True

    def __init__(self, repo: Repo, view: str, allow: Iterable[str] = (), models: Iterable[str] = ()) -> None:
        super().__init__(repo, view, allow, models=models)
        self.exchanges: list[tuple[dict[str, Any], list[Blob]]] = []
        self.started = int(time.time() * 1000)
        self._rec_lock = threading.Lock()
        self._params = sensitive_params(repo.config) | QUERY_SECRETS
        self._hidden = sensitive_headers(repo.config) | {"set-cookie"} | HOP_BY_HOP

    @property
    def model_calls(self) -> list[dict[str, Any]]:
        with self._rec_lock:
            return [call_line(i, e) for i, e in enumerate(e for e, _ in self.exchanges if "model" in e)]

    def passed_through(
        self, req: Request, status: int, headers: list[tuple[str, str]], body: bytes | None, timing: Timing
    ) -> None:
        super().passed_through(req, status, headers, body, timing)
        url = hide_params(req.url, self._params)
        if body is None:
            self.failed(f"{req.method} {url}", "the answer was too large to keep, so it is not in the recording")
            return
        blob = Blob(body)
        kept = {k.lower(): v for k, v in headers if k.lower() not in self._hidden}
        entry: dict[str, Any] = {
            "fp": fingerprint(req.method, url, req.headers, req.body),
            "method": req.method,
            "url": url,
            "status": status,
            "headers": kept,
            "body": blob.id,
        }
        blobs = [blob]
        doc = models.describe(req.url, req.body) if self.rule(req).read_like and req.method == "POST" else None
        if doc is not None:
            request = Blob(models.canonical(doc))
            is_stream = models.streamed(kept)
            tokens_in, tokens_out = models.usage(models.decoded(body, kept), is_stream)
            entry["model"] = {
                "provider": doc["provider"],
                "model": doc["model"],
                "fp": models.fingerprint(doc),
                "request": request.id,
                "stream": is_stream,
                "latency_ms": round(timing.total_ms),
                "first_ms": round(timing.first_byte_ms),
                **({"tokens_in": tokens_in} if tokens_in is not None else {}),
                **({"tokens_out": tokens_out} if tokens_out is not None else {}),
            }
            blobs.append(request)
        with self._rec_lock:
            self.exchanges.append((entry, blobs))

    def finish(self) -> None:
        super().finish()
        with self._rec_lock:
            entries = tuple(freeze(e) for e, _ in self.exchanges)
            bodies = list({b.id: b for _, bs in self.exchanges for b in bs}.values())
        recording = Recording(entries, self.started, env_digest(dict(os.environ)))
        kernel.attach_recording(self.repo, self.view, recording, bodies)
        calls = sum(1 for e in entries if "model" in e)
        self.notes.append(
            f"recorded {plural(len(entries), 'read')}"
            + (f" ({plural(calls, 'model call')})" if calls else "")
            + f" as {recording.id.hex()[:12]}"
        )


def call_line(index: int, entry: Any) -> dict[str, Any]:
    """One model call of a recording as `reel show` and `reel run` list it."""
    m = entry["model"]
    return {
        "index": index,
        "url": entry["url"],
        "status": entry["status"],
        "provider": m["provider"],
        "model": m["model"],
        "stream": m["stream"],
        "tokens_in": m.get("tokens_in"),
        "tokens_out": m.get("tokens_out"),
        "latency_ms": m["latency_ms"],
        "first_ms": m["first_ms"],
        "fingerprint": m["fp"],
    }


def calls_total(calls: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "calls": len(calls),
        "tokens_in": sum(c["tokens_in"] or 0 for c in calls),
        "tokens_out": sum(c["tokens_out"] or 0 for c in calls),
        "latency_ms": sum(c["latency_ms"] for c in calls),
    }


@dataclass
class Divergence:
    index: int
    """Position in the replayed sequence of reads (of model calls, for a model call)."""
    method: str
    url: str
    expected: dict[str, str] | None
    """The recorded request that was due here (None: the recording was used up)."""
    nearest: dict[str, str] | None
    diff: str = ""
    model: str | None = None
    """For a model call: the model it asked for."""
    fp: str = ""
    """For a model call: its fingerprint (a retry of it is the same divergence)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "method": self.method,
            "url": self.url,
            "expected": self.expected,
            "nearest": self.nearest,
            "diff": self.diff,
            "model": self.model,
        }

    @property
    def what(self) -> str:
        return f"model call {self.index} ({self.model})" if self.model is not None else f"read {self.index}"


@dataclass
class _Cursor:
    position: int = 0
    calls: int = 0
    """Model calls answered or diverged so far."""
    divergences: list[Divergence] = field(default_factory=list)


class ReplayProxy(HttpProxy):
    """`reel replay`: reads answered from `recording`, in order; nothing passes to the network unless
    `allow_live` (or, for model calls, `live_models`), and every divergence is reported."""

    def __init__(
        self,
        repo: Repo,
        view: str,
        recording: Recording,
        allow: Iterable[str] = (),
        allow_live: bool = False,
        models: Iterable[str] = (),
        live_models: bool = False,
    ) -> None:
        super().__init__(repo, view, allow, models=[*models, *recorded_model_origins(recording)])
        self.recording = recording
        self.allow_live = allow_live
        self.live_models = live_models
        self.cursor = _Cursor()
        self.served = 0
        self.model_requests = 0
        """Model calls sent to a model (only with `live_models`)."""
        self._params = sensitive_params(repo.config) | QUERY_SECRETS
        self._reads = [e for e in recording.entries if "model" not in e]
        self._calls = [e for e in recording.entries if "model" in e]

    @property
    def divergences(self) -> list[Divergence]:
        return self.cursor.divergences

    def finish(self) -> None:
        super().finish()
        if self.live_models:
            self.notes.append(f"sent {plural(self.model_requests, 'model call')} to the model (--live-models)")

    def decide(self, req: Request) -> Answer | None:
        rule = self.rule(req)
        if req.method not in SAFE_METHODS and not rule.read_like:
            return super().decide(req)
        doc = models.describe(req.url, req.body) if rule.read_like and req.method == "POST" else None
        if doc is not None:
            return self._model_call(req, rule, doc)
        url = hide_params(req.url, self._params)
        fp = fingerprint(req.method, url, req.headers, req.body)
        with self._lock:
            at = self.cursor.position
            if at < len(self._reads) and self._reads[at]["fp"] == fp:
                self.cursor.position += 1
                self.served += 1
                return self._answer(self._reads[at], req)
            found = self._divergence(at, req.method, url)
            self.cursor.divergences.append(found)
        message = f"replay diverged at read {found.index}: {req.method} {url} is not the recording's next read" + (
            f" (expected {found.expected['method']} {found.expected['url']})"
            if found.expected
            else " (the recording has no more reads)"
        )
        if self.allow_live:
            self.notes.append(message + "; fetched live (--allow-live)")
            return self.reach(req, rule)
        return self._diverged(f"{req.method} {url}", message, found)

    def _model_call(self, req: Request, rule: Any, doc: dict[str, Any]) -> Answer | None:
        if self.live_models:
            with self._lock:
                self.model_requests += 1
            return self.reach(req, rule)
        url = hide_params(req.url, self._params)
        fp = models.fingerprint(doc)
        with self._lock:
            at = self.cursor.calls
            entry = self._calls[at] if at < len(self._calls) else None
            if entry is not None and entry["model"]["fp"] == fp:
                self.cursor.calls += 1
                self.served += 1
                return self._answer(entry, req)
            # The cursor stays: a client's retry of the same call is the same divergence, reported once.
            again = any(d.index == at and d.model is not None and d.fp == fp for d in self.cursor.divergences)
            recorded = (
                json.loads(self.repo.objects.get_as(Hash(bytes(entry["model"]["request"])), Blob).data)
                if entry is not None
                else {}
            )
            found = Divergence(
                at,
                req.method,
                url,
                {"method": entry["method"], "url": entry["url"], "model": entry["model"]["model"]}
                if entry is not None
                else None,
                None,
                models.messages_diff(recorded, doc),
                doc["model"],
                fp,
            )
            if not again:
                self.cursor.divergences.append(found)
        message = f"replay diverged at model call {at} ({doc['model']}): " + (
            "its messages, tools or parameters differ from the recorded call's"
            if entry is not None
            else "the recording has no more model calls"
        )
        if again:
            return self._refusal(found, MODEL_DIVERGED)
        return self._diverged(f"{req.method} {url}", message, found, MODEL_DIVERGED)

    def _diverged(self, what: str, message: str, found: Divergence, status: int = DIVERGED) -> Answer:
        self.failed(what, message)
        return self._refusal(found, status)

    @staticmethod
    def _refusal(found: Divergence, status: int) -> Answer:
        return Answer(
            status,
            json.dumps({"reel": "divergence", **found.to_json()}).encode(),
            [("Content-Type", "application/json")],
        )

    def _answer(self, entry: Any, req: Request) -> Answer:
        body = self.repo.objects.get_as(Hash(bytes(entry["body"])), Blob).data
        headers = [(k, str(v)) for k, v in entry["headers"].items() if k != "content-length"]
        if "model" in entry and entry["model"]["stream"]:
            return Answer(int(entry["status"]), body, headers, models.events(body))
        return Answer(int(entry["status"]), body, headers)

    def _divergence(self, at: int, method: str, url: str) -> Divergence:
        entries = self._reads
        expected = {"method": entries[at]["method"], "url": entries[at]["url"]} if at < len(entries) else None
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


def recorded_model_origins(recording: Recording) -> list[str]:
    """The origins the recording's model calls went to: a replay treats their model paths as the
    recorded run did, without being told `--model` again."""
    out: list[str] = []
    for e in recording.entries:
        if "model" in e:
            parts = urlsplit(str(e["url"]))
            origin = f"{parts.scheme}://{parts.netloc}"
            if origin not in out:
                out.append(origin)
    return out


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
