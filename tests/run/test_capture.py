"""In-process capture: `view.http_client()` (sync and async) and the requests adapter, with the official
openai SDK against a loopback OpenAI-shaped server. Read-like calls pass; other POSTs wait for the commit."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import anthropic
import httpx
import openai
from openai_shaped import REPLY, ModelServer

from reelstore import AsyncStore, Store
from reelstore.backend.service_rules import model_rules
from reelstore.capture.requests_adapter import requests_session


def _store(tmp_path: Path, server: ModelServer) -> Store:
    store = Store.init(tmp_path / "s")
    for rule in model_rules(server.url, "local"):  # the loopback model's chat route is read-like
        store.repo.config.set(f"service.{rule.name}.match", rule.match)
        store.repo.config.set(f"service.{rule.name}.class", "read")
    return store


def test_openai_sdk_chat_passes_and_another_post_waits_for_the_commit(tmp_path: Path) -> None:
    with ModelServer() as server:
        store = _store(tmp_path, server)
        view = store.fork("a1")
        client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="sk-test", http_client=view.http_client())
        answer = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "refund?"}])
        assert answer.choices[0].message.content == REPLY and server.chats == 1
        queued = client.post("/refunds", body={"customer": 7}, cast_to=httpx.Response)
        doc = queued.json()
        assert queued.status_code == 202 and doc["reel"] == "pending" and doc["view"] == "a1"
        assert queued.headers["Reel-Effect"] == doc["effect"]
        assert server.acted == [] and len(view.status().effects) == 1
        view.commit()
        assert server.acted == [("/v1/refunds", {"customer": 7})]
        assert server.chats == 1


def test_anthropic_sdk_on_httpx2_messages_pass_through(tmp_path: Path) -> None:
    with ModelServer() as server:
        view = _store(tmp_path, server).fork("a1")
        client = anthropic.Anthropic(base_url=server.url, api_key="k", http_client=view.http_client("httpx2"))
        answer = client.messages.create(model="m", max_tokens=10, messages=[{"role": "user", "content": "hi"}])
        assert answer.content[0].text == REPLY and server.chats == 1  # type: ignore[union-attr]
        assert view.status().effects == ()


def test_an_aborted_view_sends_nothing_and_a_get_passes(tmp_path: Path) -> None:
    with ModelServer() as server:
        store = _store(tmp_path, server)
        view = store.fork("a1")
        with view.http_client() as client:
            assert client.post(f"{server.url}/notify", json={"n": 1}).status_code == 202
            assert client.get(f"{server.url}/nothing-here").status_code == 501  # GET went to the server
            transport = client._transport
        assert [p["method"] for p in transport.passed] == ["GET"]  # type: ignore[attr-defined]
        view.abort()
        assert server.acted == []


def test_a_refused_request_is_answered_with_its_code(tmp_path: Path) -> None:
    with ModelServer() as server:
        store = _store(tmp_path, server)
        view = store.fork("narrow", caps=["read,write=docs/"])  # no fire capability at all
        with view.http_client() as client:
            answer = client.post(f"{server.url}/pay", json={"n": 1})
        assert answer.status_code == 403 and answer.json()["error"]["code"] == "E009"
        assert view.status().effects == ()


def test_async_client_captures_concurrent_posts(tmp_path: Path) -> None:
    with ModelServer() as server:
        _store(tmp_path, server)
        astore = AsyncStore.open(tmp_path / "s")

        async def run() -> None:
            view = await astore.fork("a1")
            async with view.http_client() as client:
                sent = await asyncio.gather(*(client.post(f"{server.url}/n/{i}", json={"i": i}) for i in range(4)))
                chat = await client.post(f"{server.url}/v1/chat/completions", json={"model": "m", "messages": []})
            assert [r.status_code for r in sent] == [202] * 4 and chat.json()["choices"][0]["message"]["content"]
            assert server.acted == []
            await view.commit()

        asyncio.run(run())
        assert sorted(path for path, _ in server.acted) == [f"/n/{i}" for i in range(4)]


def test_requests_adapter_captures_a_post(tmp_path: Path) -> None:
    with ModelServer() as server:
        store = _store(tmp_path, server)
        view = store.fork("a1")
        session = requests_session(view)
        answer = session.post(f"{server.url}/pay", json={"amount": 5})
        assert answer.status_code == 202 and answer.json()["effect"] == answer.headers["Reel-Effect"]
        chat = session.post(f"{server.url}/v1/chat/completions", json={"model": "m", "messages": []})
        assert chat.json()["choices"][0]["message"]["content"] == REPLY
        assert server.acted == []
        view.commit()
        assert server.acted == [("/pay", {"amount": 5})]
        assert json.loads(answer.text)["reel"] == "pending"


def test_http_client_is_what_the_proxy_answers(tmp_path: Path) -> None:
    """Both captures build their 202 body from one function: same keys, same note."""
    with ModelServer() as server:
        store = _store(tmp_path, server)
        view = store.fork("a1")
        doc = view.http_client().post(f"{server.url}/x", content=b"hi").json()
        assert set(doc) == {"reel", "view", "effect", "class", "delivery", "resource", "note"}
        assert doc["resource"] == f"http:POST:{server.url}/x"
