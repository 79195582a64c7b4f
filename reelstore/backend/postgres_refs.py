"""Refs of a Postgres store: table `refs`, reflogs in `reflog`, and the outbox a commit fills.

A ref transaction is one SQL transaction: `_lock` begins it and locks the rows of every name in name
order (`SELECT … FOR UPDATE`, so two writers of one ref queue instead of failing); `_apply` writes each
change as a compare-and-swap (`UPDATE … WHERE target = old`, an insert that must not find the name, a
delete), appends reflog rows, and the outbox rows the transaction owes; the operation log's line joins
the same transaction (backend/postgres `PgFiles`); `_unlock` commits when the transaction landed and
rolls back otherwise. So a failed compare, a crash or a lost connection leaves every table as it was.

Reflogs are append-only: deleting a ref appends a row with no new value, and a ref's reflog is what
follows its last such row (a ref deleted and made again starts a new log, as on disk).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

from reelstore.backend.postgres import PgDb
from reelstore.backend.refdb.ref_format import NameSet, keeps_reflog
from reelstore.backend.refdb.ref_transaction import Owed, RefUpdate
from reelstore.backend.refdb.reflog import ReflogEntry
from reelstore.backend.refdb.refs import RefStore
from reelstore.crashpoints import crash_point
from reelstore.errors import Conflict, StorageError
from reelstore.objects.hash import Hash
from reelstore.objects.ref import check_ref_name

QUEUE_KEY = 0x7265656C71
"""The seed of the advisory-lock key of a ref's queue (`queue`), apart from any other advisory lock."""
CHANNEL = "reel_outbox"
"""The LISTEN/NOTIFY channel a commit that owes effects notifies, with its trunk's name as payload."""


def _h(value: Any) -> Hash | None:
    return None if value is None else Hash(bytes(value))


class PgRefStore(RefStore):
    """Refs in a shared database; see the module's docstring for how a transaction maps onto SQL."""

    atomic_outbox = True

    def __init__(self, db: PgDb) -> None:
        self.db = db
        self._landed = False
        """The open transaction's writes all went through: `_unlock` commits instead of rolling back."""
        self._owed: list[Owed] = []
        """The open transaction's outbox rows. Both belong to the thread holding the connection."""
        self._locked: dict[str, Hash] = {}
        """The refs the open transaction locked, at the committed values no other writer can change
        before it ends: read from here, not the database, by its checks and its writes."""

    def _read(self, name: str) -> Hash | None:
        held = self._locked.get(name)
        if held is not None:
            return held
        row = self.db.one("SELECT target FROM refs WHERE name = %s", (name,))
        return None if row is None else _h(row[0])

    def _lock(self, names: list[str]) -> None:
        conn = self.db.begin()  # from here this thread holds the connection, and this transaction's state:
        self._landed, self._owed = False, []
        try:
            rows = conn.execute(
                'SELECT name, target FROM refs WHERE name = ANY(%s) ORDER BY name COLLATE "C" FOR UPDATE', (names,)
            )
            found = {str(n): Hash(bytes(t)) for n, t in rows.fetchall()}
            existing = set(found)
            taken = NameSet()
            for name in names:
                other = taken.conflict(name)
                if other is None and name not in existing:
                    other = self._in_the_way(conn, name)
                if other is not None:
                    raise Conflict(f"cannot lock ref {name}: ref {other} is in the way", ref=name)
                taken.add(name)
            self._locked = found
        except self.db.psycopg.Error as exc:
            self.db.end(False)
            raise self._lock_error(exc, names) from None
        except BaseException:
            self.db.end(False)
            raise

    def _lock_error(self, exc: Exception, names: list[str]) -> Exception:
        if isinstance(exc, self.db.psycopg.errors.LockNotAvailable):
            return Conflict(f"cannot lock refs {', '.join(names)}: another update held them too long")
        return self.db.failure(exc)

    @staticmethod
    def _in_the_way(conn: Any, name: str) -> str | None:
        """A ref that is a directory of `name` or lives under it (`refs/a` and `refs/a/b` never coexist)."""
        parts = name.split("/")
        ancestors = ["/".join(parts[:i]) for i in range(2, len(parts))]
        row = conn.execute(
            "SELECT name FROM refs WHERE name = ANY(%s) OR starts_with(name, %s) LIMIT 1", (ancestors, name + "/")
        ).fetchone()
        return None if row is None else str(row[0])

    def _unlock(self, names: list[str]) -> None:
        landed, self._landed, self._owed, self._locked = self._landed, False, [], {}
        if landed:
            crash_point("pg:committing")
        self.db.end(landed)

    @contextmanager
    def queue(self, name: str) -> Iterator[None]:
        """A session advisory lock keyed by `name`'s hash, held for the block: the server queues the
        writers that ask for it and frees it if one dies. Past the lock timeout the block runs unqueued."""
        lock = "SELECT pg_advisory_lock(hashtextextended(%s, %s))"
        try:
            self.db.run(lambda conn: conn.execute(lock, (name, QUEUE_KEY)))
            queued = True
        except StorageError:  # waited past the lock timeout, or lost the connection: the CAS decides
            queued = False
        try:
            yield
        finally:
            if queued:
                unlock = "SELECT pg_advisory_unlock(hashtextextended(%s, %s))"
                with suppress(StorageError):
                    self.db.run(lambda conn: conn.execute(unlock, (name, QUEUE_KEY)))

    def _settle(self) -> None:
        self._landed = True

    def _owe(self, owed: list[Owed]) -> None:
        self._owed = list(owed)

    def _apply(self, updates: list[RefUpdate], message: str, principal: str, held: set[str]) -> None:
        def work(conn: Any) -> None:
            self._write(conn, updates, message, principal)
            crash_point("pg:refs-written")
            if self._owed:
                self._write_outbox(conn)
                crash_point("pg:outbox-written")

        self.db.run(work)  # inside the transaction `_lock` began

    def _write(self, conn: Any, updates: list[RefUpdate], message: str, principal: str) -> None:
        now = int(time.time() * 1000)
        for u in updates:
            old = self._locked.get(u.name)
            logged = keeps_reflog(u.name) or u.create_reflog or self._has_log(conn, u.name)
            if u.new is None:
                conn.execute("DELETE FROM refs WHERE name = %s", (u.name,))
                if logged:
                    self._reflog_row(conn, u.name, old, None, now, principal, message)
                continue
            if old is None:
                done = conn.execute(
                    "INSERT INTO refs (name, target) VALUES (%s, %s) ON CONFLICT (name) DO NOTHING",
                    (u.name, bytes(u.new)),
                ).rowcount
            else:
                done = conn.execute(
                    "UPDATE refs SET target = %s WHERE name = %s AND target = %s", (bytes(u.new), u.name, bytes(old))
                ).rowcount
            if done != 1:
                raise Conflict(f"cannot update ref {u.name}: another writer moved it", ref=u.name)
            if logged:
                self._reflog_row(conn, u.name, old, u.new, now, principal, message)

    def _write_outbox(self, conn: Any) -> None:
        """One row per owed effect, and a wake-up for the workers listening on the trunk's channel."""
        try:
            with conn.transaction(), conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO outbox (op_id, trunk, record, position, effect, tier, updated) "
                    "VALUES (%s, %s, %s, %s, %s, %s, now())",
                    [(o.op_id, o.trunk, bytes(o.record), o.position, bytes(o.effect), o.tier) for o in self._owed],
                )
        except self.db.psycopg.errors.UniqueViolation:
            raise Conflict(
                "an operation of this commit is already in the outbox (another record holds it); nothing was committed",
                op=self._owed[0].op_id,
            ) from None
        for trunk in sorted({o.trunk for o in self._owed}):
            conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, trunk))

    @staticmethod
    def _has_log(conn: Any, name: str) -> bool:
        row = conn.execute(
            "SELECT new IS NOT NULL FROM reflog WHERE name = %s ORDER BY seq DESC LIMIT 1", (name,)
        ).fetchone()
        return bool(row and row[0])

    @staticmethod
    def _reflog_row(
        conn: Any, name: str, old: Hash | None, new: Hash | None, now: int, principal: str, message: str
    ) -> None:
        conn.execute(
            "INSERT INTO reflog (name, old, new, time_ms, principal, message) VALUES (%s, %s, %s, %s, %s, %s)",
            (name, None if old is None else bytes(old), None if new is None else bytes(new), now, principal, message),
        )

    def names(self) -> Iterator[str]:
        return iter([str(r[0]) for r in self.db.rows('SELECT name FROM refs ORDER BY name COLLATE "C"')])

    def reflog(self, name: str) -> list[ReflogEntry]:
        check_ref_name(name)
        rows = self.db.rows(
            "SELECT old, new, time_ms, principal, message FROM reflog WHERE name = %s AND seq > "
            "coalesce((SELECT max(seq) FROM reflog WHERE name = %s AND new IS NULL), 0) ORDER BY seq",
            (name, name),
        )
        return [ReflogEntry(_h(o), _h(n), int(t), str(p), str(m)) for o, n, t, p, m in rows]

    # Last in the class: below it, `list` in an annotation would name this method.
    def list(self, prefix: str = "refs/") -> list[tuple[str, Hash]]:
        """Every ref whose name starts with `prefix`, sorted by name: one query, not one per ref."""
        rows = self.db.rows(
            'SELECT name, target FROM refs WHERE starts_with(name, %s) ORDER BY name COLLATE "C"', (prefix,)
        )
        return [(str(n), Hash(bytes(t))) for n, t in rows]
