"""httpx transports that capture: `view.http_client()` and `AsyncViewHandle.http_client()` build on these.

    OpenAI(http_client=view.http_client())                # chat completions pass; other POSTs wait
    Anthropic(http_client=view.http_client("httpx2"))     # an SDK built on httpx2 takes only its clients

httpx and its successor httpx2 share one API; the transports are made for whichever package the
caller names, since an SDK refuses the other's objects. Passed-through exchanges are listed in
`transport.passed` (method, url, status) and captured ones in `transport.captured` (method, url,
effect id), as `reel run` lists them in its summary.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from reelstore.capture import end_to_end, http_op, passes, pending, refused, serial, serial_async
from reelstore.errors import BadInput, ReelError
from reelstore.extras import needs

if TYPE_CHECKING:
    from reelstore.aio import AsyncViewHandle
    from reelstore.api import ViewHandle
    from reelstore.objects import Effect

PACKAGES = ("httpx", "httpx2")


class _Ledger:
    """What both transports share: the op of a captured request, the answers, and the lists."""

    def __init__(self, http: Any, view: str) -> None:
        self.http = http
        self.view = view
        self.passed: list[dict[str, Any]] = []
        self.captured: list[dict[str, Any]] = []

    def op(self, request: Any, body: bytes) -> dict[str, Any]:
        return http_op(request.method, str(request.url), end_to_end(list(request.headers.multi_items())), body)

    def went(self, request: Any, response: Any) -> Any:
        self.passed.append({"method": request.method, "url": str(request.url), "status": response.status_code})
        return response

    def admitted(self, request: Any, made: Effect) -> Any:
        self.captured.append({"method": request.method, "url": str(request.url), "effect": made.id.hex()})
        return self.http.Response(
            202, json=pending(self.view, made), headers={"Reel-Effect": made.id.hex()}, request=request
        )

    def refused(self, request: Any, err: ReelError) -> Any:
        status, doc = refused(self.view, err)
        return self.http.Response(status, json=doc, request=request)


@functools.cache
def transports(package: str) -> tuple[Any, Any]:
    """The sync and async capturing transports for `package` (httpx or httpx2), made once each."""
    if package not in PACKAGES:
        raise BadInput(f"http_client: package must be one of {', '.join(PACKAGES)}, not {package!r}")
    http: Any = needs(package, "http", f"http_client({package!r})")

    class CaptureTransport(http.BaseTransport, _Ledger):  # type: ignore[misc]
        """Read-like requests go to `upstream` (default: the package's own transport); the rest become
        effects of the view."""

        def __init__(self, view: ViewHandle, upstream: Any = None) -> None:
            _Ledger.__init__(self, http, view.name)
            self.handle = view
            self.upstream = upstream or http.HTTPTransport()

        def handle_request(self, request: Any) -> Any:
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

    class AsyncCaptureTransport(http.AsyncBaseTransport, _Ledger):  # type: ignore[misc]
        """The coroutine twin, for the package's `AsyncClient`."""

        def __init__(self, view: AsyncViewHandle, upstream: Any = None) -> None:
            _Ledger.__init__(self, http, view.name)
            self.handle = view
            self.upstream = upstream or http.AsyncHTTPTransport()

        async def handle_async_request(self, request: Any) -> Any:
            if passes(self.handle.store.store.repo.config, request.method, str(request.url)):
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

    return CaptureTransport, AsyncCaptureTransport


def client(view: ViewHandle, package: str = "httpx", **kwargs: Any) -> Any:
    """A `Client` of `package` whose every request goes through a capturing transport on `view`."""
    sync, _ = transports(package)
    return needs(package, "http").Client(transport=sync(view), **kwargs)


def async_client(view: AsyncViewHandle, package: str = "httpx", **kwargs: Any) -> Any:
    """An `AsyncClient` of `package` whose every request goes through a capturing transport on `view`."""
    _, coro = transports(package)
    return needs(package, "http").AsyncClient(transport=coro(view), **kwargs)
