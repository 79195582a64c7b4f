"""An asyncio agent loop: several attempts run at once, each in its own view; the ones that pass their
own check commit (their effects fire), the others abort (theirs never do).

    python examples/async_agent.py STORE TARGET_URL
"""

from __future__ import annotations

import asyncio
import sys

from reelstore import HttpRequest
from reelstore.aio import AsyncStore


async def attempt(store: AsyncStore, n: int, url: str) -> str:
    try:
        async with store.view(f"attempt-{n}") as v:
            await v.put(f"notes/answer-{n}.txt", f"answer {n * n}\n")
            await v.effect("http", HttpRequest("POST", f"{url}/publish", json={"answer": n * n}))
            if n % 2:  # the agent's own check fails: the exception aborts the view, nothing is sent
                raise ValueError(f"attempt {n} rejected its answer")
        return f"attempt-{n}: committed as {v.result.record.hex()[:12] if v.result and v.result.record else '?'}"
    except ValueError as err:
        return f"attempt-{n}: aborted ({err})"


async def main(path: str, url: str) -> None:
    store = AsyncStore.open_or_init(path)
    for line in await asyncio.gather(*(attempt(store, n, url) for n in range(4))):
        print(line)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2].rstrip("/")))
