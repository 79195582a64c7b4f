"""`AsyncStore` runs its verbs on its own bounded executor: fifty drains held by a slow loopback target
leave the application's own `asyncio.to_thread` calls free, and never run more than its threads."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from reelstore.adapters.http_request import HttpRequest
from reelstore.aio import WORKERS, AsyncStore

DRAINS = 50


class Gate:
    """A loopback target that holds every request until `release`, counting those in flight."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.lock = threading.Lock()
        self.waiting = 0
        self.most = 0
        self.answered = 0
        gate = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with gate.lock:
                    gate.waiting += 1
                    gate.most = max(gate.most, gate.waiting)
                gate.release.wait(timeout=30)
                with gate.lock:
                    gate.waiting -= 1
                    gate.answered += 1
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *_: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def gate() -> Iterator[Gate]:
    g = Gate()
    yield g
    g.release.set()
    g.server.shutdown()
    g.server.server_close()


async def _commit_one(store: AsyncStore, url: str, i: int) -> str:
    async with store.view(f"v{i}") as v:
        await v.effect("http", HttpRequest("POST", f"{url}/pay", json={"n": i}))
    assert v.result is not None and v.result.drain is not None
    return v.result.drain.outcomes[0].state


async def _until(check: object, what: str) -> None:
    for _ in range(600):  # bounded: 30 s
        if check():  # type: ignore[operator]
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.parametrize("own", [False, True], ids=["default-executor", "given-executor"])
def test_slow_drains_never_starve_the_applications_threads(tmp_path: Path, gate: Gate, own: bool) -> None:
    pool = ThreadPoolExecutor(2, thread_name_prefix="mine") if own else None
    workers = 2 if own else WORKERS

    async def go() -> list[str]:
        store = AsyncStore.init(tmp_path / "s", executor=pool)
        commits = [asyncio.ensure_future(_commit_one(store, gate.url, i)) for i in range(DRAINS)]
        await _until(lambda: gate.waiting == workers, f"{workers} drains held by the target")
        # every thread of the store's executor is held by a drain; the application's own threads are not
        assert await asyncio.wait_for(asyncio.to_thread(lambda: "mine"), timeout=10) == "mine"
        assert gate.answered == 0 and not any(c.done() for c in commits)
        gate.release.set()
        states = await asyncio.gather(*commits)
        store.close()
        return states

    states = asyncio.run(go())
    assert states == ["succeeded"] * DRAINS and gate.answered == DRAINS
    assert gate.most == workers  # bounded by the store's executor, not by how many were started
    if pool is not None:
        pool.shutdown()
