"""A store whose objects, refs, reflogs and operation log live in one PostgreSQL database, so every
machine that opens it (`core.backend = postgresql://…`) shares one trunk, while its `.reel` directory
keeps what stays local (config, hooks, secrets, scratch files).

One connection per open store (`PgDb`), used by one thread at a time under a lock. A ref transaction is
one SQL transaction from its first lock to its last write (see backend/postgres_refs); every other
statement commits on its own, or joins the ref transaction this thread holds open, so an
operation-log line written while refs are locked commits or rolls back with them.

psycopg is an optional dependency (`reelstore[postgres]`), loaded through `extras.needs`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import parse_qs, urlsplit

from reelstore.backend.object_store import ObjectStore
from reelstore.backend.op_log import FILE as OPS_FILE
from reelstore.backend.state_files import DiskFiles
from reelstore.errors import BadInput, Conflict, NotFound, StorageError, Unreachable
from reelstore.extras import needs
from reelstore.objects.hash import Hash

T = TypeVar("T")
SCHEMA_VERSION = 1
SCHEMES = ("postgresql", "postgres")
LOCK_TIMEOUT = "10s"
"""How long a ref lock (a row locked FOR UPDATE) is waited for before E002, as a busy lock file is."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS reel_schema (version int NOT NULL);
CREATE TABLE IF NOT EXISTS objects (
    id bytea PRIMARY KEY, data bytea NOT NULL, written timestamptz NOT NULL DEFAULT now());
CREATE TABLE IF NOT EXISTS refs (name text PRIMARY KEY, target bytea NOT NULL);
CREATE TABLE IF NOT EXISTS reflog (
    seq bigserial PRIMARY KEY, name text NOT NULL, old bytea, new bytea, time_ms bigint NOT NULL,
    principal text NOT NULL, message text NOT NULL);
CREATE INDEX IF NOT EXISTS reflog_name ON reflog (name, seq);
CREATE TABLE IF NOT EXISTS oplog (seq bigserial PRIMARY KEY, line bytea NOT NULL);
CREATE TABLE IF NOT EXISTS tombstones (seq bigserial PRIMARY KEY, line bytea NOT NULL);
CREATE TABLE IF NOT EXISTS outbox (
    op_id text PRIMARY KEY, trunk text NOT NULL, record bytea NOT NULL, position int NOT NULL,
    effect bytea NOT NULL, tier text NOT NULL, state text NOT NULL DEFAULT 'owed',
    epoch bigint NOT NULL DEFAULT 0, worker text, lease_until timestamptz, outcome jsonb,
    seq bigserial, updated timestamptz);
CREATE INDEX IF NOT EXISTS outbox_owed ON outbox (trunk, seq) WHERE state NOT IN ('done', 'failed');
"""
_SCHEMA_LOCK = 0x7265656C
"""The advisory lock two processes creating the schema at once take, so one creates and one finds."""


def check_url(url: str, field: str) -> str:
    """`url` if it names a Postgres database without a password; E014 naming `field` otherwise (the URL
    is written to the store's config, so a password must come from PGPASSWORD or ~/.pgpass)."""
    try:
        parts = urlsplit(url)
        password, _ = parts.password, parts.port
    except ValueError as exc:
        raise BadInput(f"{field}: {url!r} is not a URL: {exc}", field=field) from None
    if parts.scheme not in SCHEMES:
        raise BadInput(
            f"{field}: {url!r} is not a postgresql:// URL (the one backend besides the default local store)",
            field=field,
        )
    if password is not None or "password" in {k.lower() for k in parse_qs(parts.query)}:
        raise BadInput(
            f"{field}: the URL holds a password, and it would be written to .reel/config; give it in "
            "PGPASSWORD or ~/.pgpass instead",
            field=field,
        )
    return url


class PgDb:
    """The store's connection: opened on first use, again after the server dropped it, one thread at a
    time. Outside a ref transaction every statement commits on its own (autocommit: one round trip);
    `begin`/`end` hold a transaction open across statements, and `run` joins it from the same thread."""

    def __init__(self, url: str, field: str = "core.backend") -> None:
        self.url = check_url(url, field)
        self.field = field
        self.psycopg: Any = needs("psycopg", "postgres", "a Postgres-backed store")
        self._lock = threading.RLock()
        self._conn: Any = None
        self._open = False

    def _connection(self) -> Any:
        if self._conn is None or self._conn.closed:
            try:
                conn = self.psycopg.connect(self.url, autocommit=True)
            except self.psycopg.ProgrammingError as exc:
                raise BadInput(
                    f"{self.field}: {self.url!r} is not a usable Postgres URL: {exc}", field=self.field
                ) from None
            except self.psycopg.Error as exc:
                raise Unreachable(
                    f"{self.field}: cannot connect to {self.url}: {_first_line(exc)}", field=self.field
                ) from None
            try:
                conn.execute(f"SET lock_timeout = '{LOCK_TIMEOUT}'")
                _ensure_schema(conn)
            except BaseException:
                conn.close()
                raise
            self._conn = conn
        return self._conn

    def begin(self) -> Any:
        """Open a transaction this thread holds until `end` (the lock stays taken meanwhile). A
        connection the server dropped since its last use is opened again, once."""
        self._lock.acquire()
        if self._open:  # this thread already holds a transaction open (a ref transaction it prepared)
            self._lock.release()
            raise Conflict("cannot lock refs: this store's open ref transaction holds its connection")
        try:
            try:
                conn = self._connection()
                conn.execute("BEGIN")
            except self.psycopg.OperationalError:
                if not self.lost():
                    raise
                conn = self._connection()
                conn.execute("BEGIN")
        except self.psycopg.Error as exc:
            self._lock.release()
            raise self.failure(exc) from None
        except BaseException:
            self._lock.release()
            raise
        self._open = True
        return conn

    def end(self, commit: bool) -> None:
        """Commit (or roll back) the transaction `begin` opened, and let other threads in. A commit the
        server turned into a rollback (a statement of it had failed) is E007, never silent."""
        try:
            if self._conn is not None and not self._conn.closed:
                if commit:
                    try:
                        done = self._conn.execute("COMMIT").statusmessage
                    except self.psycopg.Error as exc:
                        raise self.failure(exc, "commit") from None
                    if done != "COMMIT":
                        raise StorageError(f"the Postgres store {self.url} rolled the transaction back ({done})")
                else:
                    self._conn.execute("ROLLBACK")
        except self.psycopg.Error:
            self._drop()
        finally:
            self._open = False
            self._lock.release()

    def run(self, work: Callable[[Any], T]) -> T:
        """`work(connection)`: inside the transaction this thread holds open (`begin`), or on its own,
        each statement committing as it runs. On its own, a connection the server dropped (a restart) is
        opened again and `work` run once more, so `work` must be safe to run twice: reads, inserts if
        absent, deletes, and appends to a shared log whose readers take a repeated line as one (a view's
        mark, a tombstone; a ref move's line is only ever written inside a ref transaction, never run
        twice). Any other database error is E007."""
        with self._lock:
            try:
                if self._open:
                    return work(self._conn)
                try:
                    return work(self._connection())
                except self.psycopg.OperationalError:
                    if not self.lost():
                        raise
                return work(self._connection())
            except self.psycopg.Error as exc:
                raise self.failure(exc) from None

    def one(self, sql: str, params: tuple[Any, ...] = ()) -> Any:
        """The first row `sql` returns (None if none), as `run` runs it."""
        return self.run(lambda conn: conn.execute(sql, params).fetchone())

    def rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
        """Every row `sql` returns, as `run` runs it."""
        return list(self.run(lambda conn: conn.execute(sql, params).fetchall()))

    def many(self, sql: str, params: list[tuple[Any, ...]]) -> None:
        """`sql` once per tuple of `params` (pipelined), as `run` runs it."""

        def work(conn: Any) -> None:
            with conn.cursor() as cur:
                cur.executemany(sql, params)

        self.run(work)

    def lost(self) -> bool:
        """Whether the connection is gone (the server restarted or dropped it): the next use reconnects."""
        if self._conn is not None and (self._conn.closed or self._conn.broken):
            self._drop()
        return self._conn is None

    def failure(self, exc: Exception, doing: str = "") -> StorageError:
        """E007 for a database error; a lost connection is dropped, so the next use connects again."""
        if isinstance(exc, self.psycopg.OperationalError):
            self._drop()
        what = f" during {doing} (whether it took effect is unknown)" if doing == "commit" else ""
        return StorageError(f"the Postgres store {self.url} failed{what}: {_first_line(exc)}")

    def _drop(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            finally:
                self._conn = None

    def close(self) -> None:
        with self._lock:
            self._drop()


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _ensure_schema(conn: Any) -> None:
    """Create the tables if this database has none yet; E014 for another schema version."""
    if conn.execute("SELECT to_regclass('reel_schema')").fetchone()[0] is None:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
            conn.execute(_SCHEMA)
            if conn.execute("SELECT 1 FROM reel_schema").fetchone() is None:
                conn.execute("INSERT INTO reel_schema VALUES (%s)", (SCHEMA_VERSION,))
    row = conn.execute("SELECT version FROM reel_schema").fetchone()
    if row is None or row[0] != SCHEMA_VERSION:
        raise BadInput(f"the Postgres store's schema version is {row and row[0]}, this reel wants {SCHEMA_VERSION}")


class PgObjectStore(ObjectStore):
    """Table `objects`: one row per object, keyed by its id, inserted if absent, its bytes never changed.
    Every read re-hashes the bytes, as every store does."""

    def __init__(self, db: PgDb) -> None:
        self.db = db

    def has(self, h: Hash) -> bool:
        return self.db.one("SELECT 1 FROM objects WHERE id = %s", (bytes(h),)) is not None

    def get_raw(self, h: Hash) -> bytes:
        row = self.db.one("SELECT data FROM objects WHERE id = %s", (bytes(h),))
        if row is None:
            raise NotFound(f"no object {h.hex()}", id=h)
        raw = bytes(row[0])
        if Hash.of(raw) != h:
            raise StorageError(f"object {h.hex()} is damaged: content does not hash to its id", id=h)
        return raw

    def _store(self, items: list[tuple[Hash, bytes]]) -> None:
        if not items:
            return
        # An object's bytes never change; writing it again only makes it young again (gc's grace period
        # protects what a writer is about to reference, as a re-put file's mtime does on disk), at most
        # once a minute so that hot objects (the empty tree) are not rewritten at every put.
        self.db.many(
            "INSERT INTO objects (id, data) VALUES (%s, %s) ON CONFLICT (id) DO UPDATE SET written = now() "
            "WHERE objects.written < now() - interval '1 minute'",
            [(bytes(h), raw) for h, raw in items],
        )

    def __iter__(self) -> Iterator[Hash]:
        return iter([Hash(bytes(r[0])) for r in self.db.rows("SELECT id FROM objects ORDER BY id")])

    def _candidates(self, prefix: str) -> list[Hash]:
        pad = 64 - len(prefix)
        low, high = bytes.fromhex(prefix + "0" * pad), bytes.fromhex(prefix + "f" * pad)
        rows = self.db.rows("SELECT id FROM objects WHERE id BETWEEN %s AND %s ORDER BY id LIMIT 2", (low, high))
        return [Hash(bytes(r[0])) for r in rows]

    def mtime(self, h: Hash) -> float:
        row = self.db.one("SELECT extract(epoch FROM written) FROM objects WHERE id = %s", (bytes(h),))
        if row is None:
            raise NotFound(f"no object {h.hex()}", id=h)
        return float(row[0])

    def delete(self, h: Hash) -> None:
        self.db.run(lambda conn: conn.execute("DELETE FROM objects WHERE id = %s", (bytes(h),)))


SHARED_LOGS = {OPS_FILE: "oplog", "ops/aborted": "tombstones"}
"""The append-only state files every machine sharing the store must see, by the table that holds them:
the operation log, and the aborts' tombstones (what no view brought back may commit; the drain names
that file). The other state files (caches, locks, hooks, secrets) stay in each machine's `.reel`."""


class PgFiles(DiskFiles):
    """The store's state files: local ones in `.reel`, except the shared logs (`SHARED_LOGS`), each an
    append-only table, so every machine's `reel op log`, `reel undo` and commit checks see them whole."""

    def __init__(self, root: Path, db: PgDb) -> None:
        super().__init__(root)
        self.db = db

    def _log(self, table: str) -> bytes:
        return b"".join(bytes(r[0]) for r in self.db.rows(f"SELECT line FROM {table} ORDER BY seq"))

    def read(self, name: str) -> bytes | None:
        table = SHARED_LOGS.get(name)
        return super().read(name) if table is None else self._log(table)

    def tail(self, name: str, offset: int) -> bytes | None:
        table = SHARED_LOGS.get(name)
        if table is None:
            return super().tail(name, offset)
        data = self._log(table)
        return None if len(data) < offset else data[offset:]

    def append(self, name: str, data: bytes, *, durable: bool = True) -> None:
        table = SHARED_LOGS.get(name)
        if table is None:
            super().append(name, data, durable=durable)
            return
        self.db.run(lambda conn: conn.execute(f"INSERT INTO {table} (line) VALUES (%s)", (data,)))

    def _append_only(self, name: str) -> None:
        if name in SHARED_LOGS:
            raise BadInput(f"{name} of a Postgres store is an append-only table")

    def write(self, name: str, data: bytes) -> None:
        self._append_only(name)
        super().write(name, data)

    def create(self, name: str, data: bytes) -> bool:
        self._append_only(name)
        return super().create(name, data)

    def remove(self, name: str) -> None:
        self._append_only(name)
        super().remove(name)
