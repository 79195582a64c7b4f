"""A model call's fingerprint document and its token counts, across the providers' shapes."""

from __future__ import annotations

import json

from reelstore.intercept import models


def test_fingerprint_leaves_out_volatile_fields_and_keeps_what_changes_the_answer() -> None:
    url = "https://api.openai.com/v1/chat/completions"
    base = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "temperature": 0.2}
    doc = models.describe(url, json.dumps(base).encode())
    assert doc == {
        "provider": "openai",
        "model": "m",
        "messages": {"messages": base["messages"]},
        "tools": {},
        "parameters": {"temperature": 0.2},
    }
    noisy = {**base, "user": "u-1", "stream_options": {"include_usage": True}, "metadata": {"run": "x"}}
    assert models.fingerprint(models.describe(url, json.dumps(noisy).encode()) or {}) == models.fingerprint(doc)
    for changed in (
        {**base, "temperature": 0.3},
        {**base, "model": "n"},
        {**base, "tools": [{"type": "x"}]},
        {**base, "messages": [{"role": "user", "content": "hi!"}]},
        {**base, "stream": True},
    ):
        assert models.fingerprint(models.describe(url, json.dumps(changed).encode()) or {}) != models.fingerprint(doc)
    assert models.describe(url, b"not json") is None and models.describe(url, b"[1]") is None
    assert models.describe("https://search.example/v1/query", json.dumps(base).encode()) is None


def test_provider_and_model_come_from_the_path_where_the_api_puts_them() -> None:
    gem = "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.0-flash:generateContent?key=k"
    doc = models.describe(gem, b'{"contents": [{"parts": [{"text": "hi"}]}]}')
    assert doc is not None and (doc["provider"], doc["model"]) == ("gemini", "gemini-2.0-flash")
    assert "contents" in doc["messages"]
    assert models.provider("https://api.anthropic.com/v1/messages") == "anthropic"
    assert models.provider("http://127.0.0.1:11434/api/chat") == "ollama"


def test_tokens_from_each_usage_shape_streamed_or_not() -> None:
    assert models.usage(b'{"usage": {"prompt_tokens": 3, "completion_tokens": 4}}', False) == (3, 4)
    assert models.usage(b'{"usage": {"input_tokens": 5, "output_tokens": 6}}', False) == (5, 6)
    assert models.usage(b'{"usageMetadata": {"promptTokenCount": 7, "candidatesTokenCount": 8}}', False) == (7, 8)
    assert models.usage(b'{"prompt_eval_count": 9, "eval_count": 10}', False) == (9, 10)
    assert models.usage(b"<html>", False) == (None, None)
    import gzip
    import zlib

    plain = b'{"usage": {"prompt_tokens": 3, "completion_tokens": 4}}'
    assert models.usage(models.decoded(gzip.compress(plain), {"content-encoding": "gzip"}), False) == (3, 4)
    assert models.decoded(zlib.compress(plain), {"content-encoding": "deflate"}) == plain
    assert models.decoded(b"not gzip", {"content-encoding": "gzip"}) == b"not gzip"
    anthropic = (
        b'event: message_start\ndata: {"type": "message_start", "message": {"usage": {"input_tokens": 11, '
        b'"output_tokens": 1}}}\n\nevent: message_delta\ndata: {"type": "message_delta", "usage": '
        b'{"output_tokens": 12}}\n\n'
    )
    assert models.usage(anthropic, True) == (11, 12)
    openai = (
        b'data: {"choices": []}\n\ndata: {"usage": {"prompt_tokens": 1, "completion_tokens": 2}}\n\ndata: [DONE]\n\n'
    )
    assert models.usage(openai, True) == (1, 2)
    assert models.events(openai) == (
        b'data: {"choices": []}\n\n',
        b'data: {"usage": {"prompt_tokens": 1, "completion_tokens": 2}}\n\n',
        b"data: [DONE]\n\n",
    )


def test_a_recording_keeps_a_model_call_and_refuses_a_malformed_one() -> None:
    import pytest

    from reelstore.codec import freeze
    from reelstore.errors import BadInput
    from reelstore.objects import Blob, Recording
    from reelstore.objects.block import decode

    body, request = Blob(b"{}"), Blob(b'{"model":"m"}')
    model = {
        "provider": "openai",
        "model": "m",
        "fp": "ab" * 32,
        "request": request.id,
        "stream": True,
        "latency_ms": 12,
        "first_ms": 3,
        "tokens_in": 5,
        "tokens_out": 7,
    }
    entry = {
        "fp": "cd" * 32,
        "method": "POST",
        "url": "http://127.0.0.1:8000/v1/chat/completions",
        "status": 200,
        "headers": {},
        "body": body.id,
        "model": model,
    }
    rec = Recording((freeze(entry),), 1, "e")
    again = decode(rec.encode())
    assert again == rec and set(again.references()) == {body.id, request.id}
    for bad in (
        {**model, "stream": "yes"},
        {k: v for k, v in model.items() if k != "fp"},
        {**model, "extra": 1},
        {**model, "tokens_in": -1},
    ):
        with pytest.raises(BadInput, match="model"):
            decode(Recording((freeze({**entry, "model": bad}),), 1, "e").encode())
