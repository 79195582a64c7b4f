"""A restart-safe refund agent, run as a process the tests SIGKILL at random points.

    python refund_agent.py STORE URL TASKS

For each task n it queues one blind refund under the task key `refund:ticket-n` and commits it.
Killed anywhere and started again, it picks up where it stopped: a leftover view is aborted, an
effect owed by a landed commit is sent by `recover`, and a task whose key is already held by a
record is done (E008 at admission): no task is ever refunded twice.
"""

from __future__ import annotations

import sys

from reelstore.api import Store
from reelstore.errors import EffectsIncomplete, NotFound, ViewTerminal


def main(path: str, url: str, tasks: int) -> None:
    store = Store.open(path)
    try:
        store.recover()
    except EffectsIncomplete:
        pass  # an unknown blind send: the operator settles it; it is never resent
    for n in range(tasks):
        key, name = f"refund:ticket-{n}", f"refund-{n}"
        try:
            store.abort(name)
        except (NotFound, ViewTerminal):
            pass
        view = store.fork(name)
        try:
            view.effect("http", {"method": "POST", "url": f"{url}/blind/refund", "json": {"task": n}}, key=key)
        except ViewTerminal:
            view.abort()
            continue
        try:
            view.commit()
        except EffectsIncomplete:
            pass
    print("done", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
