"""The asyncio API against a real slow HTTP target: the loop keeps running while views commit."""

from __future__ import annotations

import asyncio
import statistics
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from reelstore import Store
from reelstore.adapters.http_request import HttpRequest
from reelstore.aio import AsyncStore
from reelstore.errors import NotFound

DELAY_S = 0.2


class _Slow(BaseHTTPRequestHandler):
    hits: list[bytes] = []
    lock = threading.Lock()

    def do_POST(self) -> None:  # noqa: N802
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        time.sleep(DELAY_S)
        with self.lock:
            self.hits.append(body)
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture
def slow():
    _Slow.hits = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Slow)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


async def _ticker(stop: asyncio.Event, lateness: list[float]) -> None:
    while not stop.is_set():
        started = time.perf_counter()
        await asyncio.sleep(0.01)
        lateness.append(time.perf_counter() - started - 0.01)


def test_fifty_views_commit_concurrently_without_blocking_the_loop(tmp_path: Path, slow: str) -> None:
    store = AsyncStore.init(tmp_path)

    async def one(n: int) -> None:
        async with store.view(f"v{n}") as v:
            await v.put(f"notes/{n}.txt", f"note {n}\n")
            await v.effect("http", HttpRequest("POST", f"{slow}/notify", json={"n": n}))
        assert v.result is not None and v.result.record is not None

    async def main() -> list[float]:
        lateness: list[float] = []
        stop = asyncio.Event()
        ticker = asyncio.create_task(_ticker(stop, lateness))
        await asyncio.gather(*(one(n) for n in range(50)))
        stop.set()
        await ticker
        return lateness

    lateness = asyncio.run(main())
    print(
        f"ticks {len(lateness)} median {statistics.median(lateness) * 1000:.1f} ms p95 "
        f"{sorted(lateness)[int(len(lateness) * 0.95)] * 1000:.1f} ms max {max(lateness) * 1000:.1f} ms"
    )
    assert sorted(_Slow.hits) == sorted(f'{{"n":{n}}}'.encode() for n in range(50))
    # 50 commits that each wait 0.2 s on the target, run in the loop, would stall it for 10 s.
    assert len(lateness) > 20
    assert statistics.median(lateness) < 0.05, sorted(lateness)[-5:]
    assert sorted(lateness)[int(len(lateness) * 0.95)] < 0.05, sorted(lateness)[-5:]
    assert len(Store.open(tmp_path).log()) == 51


def test_an_exception_in_the_block_aborts_and_nothing_fires(tmp_path: Path, slow: str) -> None:
    store = AsyncStore.init(tmp_path)

    async def main() -> None:
        with pytest.raises(RuntimeError):
            async with store.view("a") as v:
                await v.effect("http", HttpRequest("POST", f"{slow}/never", json={}))
                raise RuntimeError("changed its mind")
        assert not await v.live()
        with pytest.raises(NotFound):
            await store.status("nope")

    asyncio.run(main())
    assert _Slow.hits == []


def test_cancelling_a_commit_never_interrupts_its_drain(tmp_path: Path, slow: str) -> None:
    store = AsyncStore.init(tmp_path)

    async def main() -> None:
        v = await store.fork("a")
        await v.effect("http", HttpRequest("POST", f"{slow}/once", json={"k": 1}))
        task = asyncio.create_task(v.commit())
        await asyncio.sleep(DELAY_S / 4)  # the drain is waiting on the target now
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    store.close()  # waits for the store's worker threads: the cancelled commit's drain ran to its end
    deadline = time.monotonic() + 10
    while not _Slow.hits and time.monotonic() < deadline:
        time.sleep(0.05)
    sync = Store.open(tmp_path)
    (entry, _root) = sync.log()
    assert _Slow.hits == [b'{"k":1}'] and [o["state"] for o in entry.to_json()["effects"]] == ["succeeded"]


def test_http_request_is_the_http_op() -> None:
    req = HttpRequest("PUT", "https://example.invalid/doc", headers={"X-A": "1"}, body="text", etag='"v1"')
    assert req.to_op() == {
        "method": "PUT",
        "url": "https://example.invalid/doc",
        "headers": {"X-A": "1"},
        "body": "text",
        "etag": '"v1"',
    }
    with pytest.raises(ValueError):
        HttpRequest("POST", "https://example.invalid/", json={}, body="x")
    store = Store.memory()
    v = store.fork("a")
    made = v.effect("http", HttpRequest("POST", "https://example.invalid/pay", json={"amount": 5}))
    assert made.resource == "http:POST:https://example.invalid/pay" and made.op["json"]["amount"] == 5


def test_open_or_init_opens_what_it_made_and_never_a_parent(tmp_path: Path) -> None:
    first = Store.open_or_init(tmp_path / "s")
    first.fork("a")
    again = Store.open_or_init(tmp_path / "s")
    assert [v.name for v in again.views()] == ["a"]
    inner = Store.open_or_init(tmp_path / "s" / "inner")
    assert inner.views() == [] and inner.repo.path != again.repo.path
