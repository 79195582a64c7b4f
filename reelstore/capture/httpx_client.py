"""httpx transports that capture: `view.http_client()` and `AsyncViewHandle.http_client()` build on these.

    client = view.http_client()
    OpenAI(http_client=client)      # chat completions pass through; other POSTs wait for the commit

Passed-through exchanges are listed in `transport.passed` (method, url, status) and captured ones in
`transport.captured` (method, url, effect id), as `reel run` lists them in its summary.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import httpx

from reelstore.capture import end_to_end, http_op, passes, pending, refused, serial, serial_async
from reelstore.errors import ReelError

if TYPE_CHECKING:
    from reelstore.aio import AsyncViewHandle
    from reelstore.api import ViewHandle
    from reelstore.objects import Effect
    from reelstore.storage.config import Config


class _Ledger:
    def __init__(self, view: str) -> None:
        self.view = view
        self.passed: list[dict[str, Any]] = []
        self.captured: list[dict[str, Any]] = []

    def op(self, request: httpx.Request, body: bytes) -> dict[str, Any]:
        return http_op(request.method, str(request.url), end_to_end(list(request.headers.multi_items())), body)

    def went(self, request: httpx.Request, response: httpx.Response) -> httpx.Response:
        self.passed.append({"method": request.method, "url": str(request.url), "status": response.status_code})
        return response

    def admitted(self, request: httpx.Request, made: Effect) -> httpx.Response:
        self.captured.append({"method": request.method, "url": str(request.url), "effect": made.id.hex()})
        return httpx.Response(202, json=pending(self.view, made), headers={"Reel-Effect": made.id.hex()},
                              request=request)

    def refused(self, request: httpx.Request, err: ReelError) -> httpx.Response:
        status, doc = refused(self.view, err)
        return httpx.Response(status, json=doc, request=request)


class CaptureTransport(httpx.BaseTransport, _Ledger):
    """Read-like requests go to `upstream` (default: httpx's own transport); the rest become effects."""

    def __init__(self, view: ViewHandle, upstream: httpx.BaseTransport | None = None) -> None:
        _Ledger.__init__(self, view.name)
        self.handle = view
        self.upstream = upstream or httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if passes(self.handle.repo.config, request.method, str(request.url)):
            return self.went(request, self.upstream.handle_request(request))
        op = self.op(request, request.read())
        try:
            with serial(self.handle):
                made = self.handle.effect("http", op)
        except ReelError as err:
            return self.refused(request, err)
        return self.admitted(request, made)

    def close(self) -> None:
        self.upstream.close()


class AsyncCaptureTransport(httpx.AsyncBaseTransport, _Ledger):
    """The coroutine twin of `CaptureTransport`, for `httpx.AsyncClient` (`AsyncOpenAI(http_client=…)`)."""

    def __init__(self, view: AsyncViewHandle, upstream: httpx.AsyncBaseTransport | None = None) -> None:
        _Ledger.__init__(self, view.name)
        self.handle = view
        self.upstream = upstream or httpx.AsyncHTTPTransport()

    def _config(self) -> Config:
        return self.handle.store.store.repo.config

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if passes(self._config(), request.method, str(request.url)):
            return self.went(request, await self.upstream.handle_async_request(request))
        op = self.op(request, await request.aread())
        try:
            async with serial_async(self.handle):
                made = await self.handle.effect("http", op)
        except ReelError as err:
            return self.refused(request, err)
        return self.admitted(request, made)

    async def aclose(self) -> None:
        await self.upstream.aclose()


def client(view: ViewHandle, **kwargs: Any) -> httpx.Client:
    """An `httpx.Client` whose every request goes through a `CaptureTransport` on `view`."""
    return httpx.Client(transport=CaptureTransport(view), **kwargs)


def async_client(view: AsyncViewHandle, **kwargs: Any) -> httpx.AsyncClient:
    """An `httpx.AsyncClient` whose every request goes through an `AsyncCaptureTransport` on `view`."""
    return httpx.AsyncClient(transport=AsyncCaptureTransport(view), **kwargs)
