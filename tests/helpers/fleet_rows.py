"""Outbox rows for the fleet tests: effects queued in a real view of a real store, their rows written
into the outbox of a real PostgreSQL database, as a commit writes them; and a worker to run as a real
process (`python fleet_rows.py DIR URL NAME LEASE [once]`), so that tests can SIGKILL it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import psycopg

from reelstore.api import Store
from reelstore.backend.repo import Repo
from reelstore.drain.owners import item_ops
from reelstore.objects import Effect, Effects, Hash, View

HERE = Path(__file__).resolve().parent


def make_outbox(url: str, where: Path) -> None:
    """The shared store's tables in the database at `url`, as `reel init --backend` makes them (in a
    directory of its own at `where`: the rows' effects live in the tests' store of its own)."""
    Repo.init(where, backend=url)


def queue(store: Store, view: str, ops: list[dict]) -> list[tuple[str, Hash, str]]:
    """Queue `ops` (http requests) in a new view; (op id, effect id, tier) of each, in order."""
    handle = store.fork(view)
    for op in ops:
        handle.effect("http", op)
    repo = store.repo
    head = repo.refs.get(f"refs/views/{view}")
    assert head is not None
    items = repo.objects.get_as(repo.objects.get_as(head, View).effects, Effects).items
    ops_ids = item_ops(repo, "main", items)
    return [(op, e, repo.objects.get_as(e, Effect).delivery) for op, e in zip(ops_ids, items)]


def commit_rows(url: str, record: Hash, effects: list[tuple[str, Hash, str]], trunk: str = "main") -> None:
    """One row per effect of `record`, in one transaction, with the commit's notice."""
    with psycopg.connect(url) as conn, conn.transaction():
        for position, (op, effect, tier) in enumerate(effects):
            conn.execute(
                "INSERT INTO outbox (op_id, trunk, record, position, effect, tier, updated) "
                "VALUES (%s, %s, %s, %s, %s, %s, now())",
                (op, trunk, bytes(record), position, bytes(effect), tier),
            )
        conn.execute("SELECT pg_notify('reel_outbox', %s)", (trunk,))


def states(url: str) -> dict[str, tuple[str, dict]]:
    with psycopg.connect(url) as conn:
        return {r[0]: (r[1], r[2] or {}) for r in conn.execute("SELECT op_id, state, outcome FROM outbox")}


def spawn(
    store_dir: Path, url: str, name: str, lease: float, once: bool = True, env: dict[str, str] | None = None
) -> subprocess.Popen:
    args = [sys.executable, str(HERE / "fleet_rows.py"), str(store_dir), url, name, str(lease)]
    return subprocess.Popen(args + (["once"] if once else []), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def main(argv: list[str]) -> int:
    from reelstore.fleet.worker import run

    store_dir, url, name, lease = argv[:4]
    report = run(Store.open(store_dir).repo, url, name=name, lease_s=float(lease), once="once" in argv[4:])
    print(json.dumps(report.to_json()))
    return 3 if report.fenced else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
