"""Model calls: what identifies one (its fingerprint), and what it cost (tokens, from the answer).

A model call is a read-like request to a model API (`service_rules`: OpenAI-compatible, Anthropic,
Gemini, Ollama paths). Its fingerprint is the SHA-256 of a canonical JSON document (keys sorted,
no spaces) of five parts:

- `provider`: openai, anthropic, gemini or ollama, told by the path;
- `model`: the body's `model` (Gemini: the name in the path);
- `messages`: whatever carries the conversation (`messages`, `system`, `prompt`, `input`,
  `instructions`, `contents`, `systemInstruction`, `suffix`);
- `tools`: `tools`, `functions`, `tool_choice`, `function_call`, `toolConfig`;
- `parameters`: every other field of the body, except the volatile ones (`VOLATILE`), which do not
  change the answer: `stream_options`, `user`, `metadata`, `store`, `service_tier`,
  `prompt_cache_key`, `safety_identifier`.

No header is part of it (credentials travel in headers), nor is the query string (Gemini's `key=`).
"""

from __future__ import annotations

import difflib
import hashlib
import json
import zlib
from typing import Any
from urllib.parse import urlsplit

from reelstore.backend.service_rules import GEMINI_SUFFIXES, MODEL_PATHS

MESSAGE_KEYS = ("messages", "system", "prompt", "input", "instructions", "contents", "systemInstruction", "suffix")
TOOL_KEYS = ("tools", "functions", "tool_choice", "function_call", "toolConfig")
VOLATILE = ("stream_options", "user", "metadata", "store", "service_tier", "prompt_cache_key", "safety_identifier")
"""Body fields left out of a model call's fingerprint: they do not change what the model answers."""
SSE = "text/event-stream"


def provider(url: str) -> str:
    path = urlsplit(url).path
    if path.endswith("/v1/messages"):
        return "anthropic"
    if ":" in path.rsplit("/", 1)[-1]:
        return "gemini"
    if path.startswith("/api/"):
        return "ollama"
    return "openai"


def is_model_path(url: str) -> bool:
    """`url`'s path is a model API's (`service_rules.MODEL_PATHS`, or Gemini's `:method` suffixes): a
    read-like request elsewhere (a search) is an ordinary read, not a model call."""
    path = urlsplit(url).path
    return path.endswith(MODEL_PATHS) or path.endswith(GEMINI_SUFFIXES)


def describe(url: str, body: bytes) -> dict[str, Any] | None:
    """The fingerprint document of a model call to `url` with JSON `body`; None if `url` is not a model
    path or the body is not a JSON object (then the call is recorded as an ordinary read)."""
    if not is_model_path(url):
        return None
    try:
        doc = json.loads(body or b"{}")
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(doc, dict):
        return None
    who = provider(url)
    model = doc.get("model")
    if who == "gemini":
        model = urlsplit(url).path.rsplit("/", 1)[-1].split(":", 1)[0]
    return {
        "provider": who,
        "model": model if isinstance(model, str) else "",
        "messages": {k: doc[k] for k in MESSAGE_KEYS if k in doc},
        "tools": {k: doc[k] for k in TOOL_KEYS if k in doc},
        "parameters": {k: v for k, v in doc.items() if k not in (*MESSAGE_KEYS, *TOOL_KEYS, *VOLATILE, "model")},
    }


def canonical(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def fingerprint(doc: dict[str, Any]) -> str:
    return hashlib.sha256(canonical(doc)).hexdigest()


def streamed(headers: list[tuple[str, str]] | dict[str, str]) -> bool:
    pairs = headers.items() if isinstance(headers, dict) else headers
    return any(k.lower() == "content-type" and v.lower().startswith(SSE) for k, v in pairs)


def events(body: bytes) -> tuple[bytes, ...]:
    """A server-sent-event body cut after each event (a blank line), as it was sent."""
    out: list[bytes] = []
    start = 0
    text = body.replace(b"\r\n", b"\n")
    for _ in range(len(text) + 1):
        end = text.find(b"\n\n", start)
        if end < 0:
            break
        out.append(text[start : end + 2])
        start = end + 2
    if start < len(text):
        out.append(text[start:])
    return tuple(out)


def decoded(body: bytes, headers: dict[str, str]) -> bytes:
    """`body` as the model wrote it: a gzip or deflate `Content-Encoding` undone (the client asked for
    it, so the answer is relayed and recorded compressed); as it is if undecodable."""
    coding = headers.get("content-encoding", "").strip().lower()
    try:
        if coding in ("gzip", "x-gzip"):
            return zlib.decompress(body, 16 + zlib.MAX_WBITS)
        if coding == "deflate":
            try:
                return zlib.decompress(body)
            except zlib.error:
                return zlib.decompress(body, -zlib.MAX_WBITS)
    except zlib.error:
        return body
    return body


def usage(body: bytes, is_stream: bool) -> tuple[int | None, int | None]:
    """Tokens in and out, from the answer's usage fields (the last event that has them, for a
    stream); None where the answer does not say."""
    docs: list[Any] = []
    if is_stream:
        for ev in events(body):
            for line in ev.splitlines():
                if line.startswith(b"data:") and line[5:].strip() not in (b"", b"[DONE]"):
                    try:
                        docs.append(json.loads(line[5:]))
                    except ValueError:
                        continue
    else:
        try:
            docs.append(json.loads(body))
        except (ValueError, UnicodeDecodeError):
            return None, None
    tokens_in: int | None = None
    tokens_out: int | None = None
    for doc in docs:
        if not isinstance(doc, dict):
            continue
        for found in _usages(doc):
            tin = _first_int(found, ("prompt_tokens", "input_tokens", "promptTokenCount", "prompt_eval_count"))
            tout = _first_int(found, ("completion_tokens", "output_tokens", "candidatesTokenCount", "eval_count"))
            tokens_in = tin if tin is not None else tokens_in
            tokens_out = tout if tout is not None else tokens_out
    return tokens_in, tokens_out


def _usages(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Where usage counts sit: `usage`, Gemini's `usageMetadata`, Anthropic's `message.usage`,
    Responses' `response.usage`, Ollama's top level."""
    out = [doc]
    for key in ("usage", "usageMetadata"):
        if isinstance(doc.get(key), dict):
            out.append(doc[key])
    for key in ("message", "response"):
        inner = doc.get(key)
        if isinstance(inner, dict) and isinstance(inner.get("usage"), dict):
            out.append(inner["usage"])
    return out


def _first_int(doc: dict[str, Any], keys: tuple[str, ...]) -> int | None:
    for k in keys:
        v = doc.get(k)
        if isinstance(v, int) and not isinstance(v, bool):
            return v
    return None


def messages_diff(recorded: dict[str, Any], replayed: dict[str, Any]) -> str:
    """A unified diff of two calls' fingerprint documents, pretty-printed, so that a changed message,
    tool or parameter shows as the lines that changed."""

    def lines(doc: dict[str, Any]) -> list[str]:
        return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False).splitlines()

    return "\n".join(difflib.unified_diff(lines(recorded), lines(replayed), "recorded", "replayed", lineterm=""))
