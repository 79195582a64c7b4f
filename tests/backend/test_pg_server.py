"""The private PostgreSQL server the Postgres backend's tests share: fresh databases are separate, and a
restart (the soak's mid-run restart) keeps what was committed and drops what was not."""

from __future__ import annotations

import psycopg
from pg_server import PgServer


def test_fresh_databases_are_separate(pg_server: PgServer) -> None:
    a, b = pg_server.fresh_url(), pg_server.fresh_url()
    assert a != b
    with psycopg.connect(a) as conn:
        conn.execute("CREATE TABLE t (x int)")
    with psycopg.connect(b) as conn:
        assert conn.execute("SELECT to_regclass('t')").fetchone() == (None,)


def test_a_restart_keeps_committed_rows_and_drops_open_ones(pg_server: PgServer, pg_url: str) -> None:
    with psycopg.connect(pg_url) as conn:
        conn.execute("CREATE TABLE t (x int)")
        conn.execute("INSERT INTO t VALUES (1)")
    open_txn = psycopg.connect(pg_url)
    open_txn.execute("INSERT INTO t VALUES (2)")
    pg_server.restart("immediate")
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT x FROM t ORDER BY x").fetchall() == [(1,)]
    open_txn.close()
