"""A writer that commits small views into the trunk until it holds N records, run as a process the
lock soak SIGKILLs at random points.

    python commit_writer.py STORE N [K]

Each commit is one put in a fresh view; a view a killed run left live is aborted first, so a run
never depends on what the previous one finished. With K, the process SIGKILLs itself the K-th time
it has written a ref's lock and not yet released it (a holder dying with the lock taken).
"""

from __future__ import annotations

import os
import signal
import sys

from reelstore.api import Store
from reelstore.crashpoints import set_hook
from reelstore.errors import NotFound, ViewTerminal


def records(store: Store) -> int:
    return len(store.log(limit=1 << 20))


def die_at(k: int) -> None:
    seen = 0

    def hook(point: str) -> None:
        nonlocal seen
        if point == "refs:lock-written":
            seen += 1
            if seen == k:
                os.kill(os.getpid(), signal.SIGKILL)

    set_hook(hook)


def main(path: str, goal: int) -> None:
    store = Store.open(path)
    for live in store.views():
        try:
            store.abort(live.name)
        except (NotFound, ViewTerminal):
            pass
    n = records(store)
    while n < goal:
        name = f"w-{os.getpid()}-{n}"
        view = store.fork(name)
        view.put(f"f/{n}", str(n))
        view.commit()
        n += 1
    print("done", n, flush=True)


if __name__ == "__main__":
    if len(sys.argv) > 3:
        die_at(int(sys.argv[3]))
    main(sys.argv[1], int(sys.argv[2]))
