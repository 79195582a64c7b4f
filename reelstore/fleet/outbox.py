"""The outbox of a Postgres store: the one table every drainer claims from, journals in and settles.

A commit writes one row per effect in the transaction that moves the trunk. A worker claims the next
row it may send with a lease; the claim raises the row's epoch, and that epoch is the fencing token:
the intent and the outcome are written `WHERE epoch = <the claim's>`, so once a lease has run out and
another worker has claimed the row, the first worker's writes match nothing (E016) and it stops.
Effects of one record keep their order: a row is claimable only when every earlier position of its
record is settled (done or failed).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from reelstore.errors import BadInput, Conflict, NotFound, StaleEpoch, Unreachable
from reelstore.extras import needs
from reelstore.objects import Hash

if TYPE_CHECKING:
    import psycopg
    from psycopg.rows import DictRow

    Conn = psycopg.Connection[DictRow]

_pg: Any = needs("psycopg", "postgres", "a shared store's drain")
_rows: Any = needs("psycopg.rows", "postgres", "a shared store's drain")
Error: type[Exception] = _pg.Error
OperationalError: type[Exception] = _pg.OperationalError
"""The database went away (a restart, a dropped connection): worth connecting again."""

CHANNEL = "reel_outbox"
"""The channel a commit notifies (payload: the trunk), on which idle workers listen."""

SETTLED = ("done", "failed")
STATE_OF = {
    "owed": "pending",
    "intent": "unknown",
    "done": "succeeded",
    "failed": "failed",
    "unknown": "unknown",
    "not_sent": "not_sent",
}
"""A row's state as the operator surface names it (a row in `intent` may have been sent: unknown)."""
ROW_STATE = {"succeeded": "done", "failed": "failed", "not_sent": "not_sent", "unknown": "unknown", "absent": "failed"}

_COLUMNS = (
    "op_id, trunk, record, position, effect, tier, state, epoch, worker, outcome, seq, "
    "(extract(epoch from (now() - updated)) * 1000)::bigint AS age_ms, "
    "coalesce(lease_until < now(), true) AS expired"
)


@dataclass(frozen=True)
class Row:
    """One outbox row as read: `age_ms` is how long ago it was last written (its intent, for a row in
    `intent`), `expired` whether no lease holds it now."""

    op: str
    trunk: str
    record: Hash
    position: int
    effect: Hash
    tier: str
    state: str
    epoch: int
    worker: str
    outcome: dict[str, Any]
    seq: int
    age_ms: int
    expired: bool

    @property
    def note(self) -> str:
        return str(self.outcome.get("note", ""))

    @property
    def attempts(self) -> int:
        n = self.outcome.get("attempt", 0)
        return n if isinstance(n, int) else 0


def state_of(row: Row) -> str:
    """The row's state as the operator surface names it (a row given up by an operator: `absent`)."""
    if row.state == "failed" and row.outcome.get("state") == "absent":
        return "absent"
    return STATE_OF[row.state]


def _row(d: DictRow) -> Row:
    return Row(
        str(d["op_id"]),
        str(d["trunk"]),
        Hash(bytes(d["record"])),
        int(d["position"]),
        Hash(bytes(d["effect"])),
        str(d["tier"]),
        str(d["state"]),
        int(d["epoch"]),
        str(d["worker"] or ""),
        dict(d["outcome"] or {}),
        int(d["seq"]),
        int(d["age_ms"] or 0),
        bool(d["expired"]),
    )


def connect(url: str) -> Conn:
    """An autocommit connection to the store's database (E010 if it cannot be had)."""
    try:
        conn: Conn = _pg.connect(url, autocommit=True, row_factory=_rows.dict_row, connect_timeout=10)
        return conn
    except _pg.Error as exc:
        raise Unreachable(f"cannot reach the store's database: {reason(exc)}") from None


def reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[-1] if text else type(exc).__name__


INDEXES = (
    "CREATE INDEX IF NOT EXISTS outbox_open ON outbox (seq) WHERE state IN ('owed', 'intent')",
    "CREATE INDEX IF NOT EXISTS outbox_record ON outbox (record, position)",
)


def prepare(conn: Conn) -> None:
    """The indexes a claim needs (open rows by commit order; a record's earlier positions), made once."""
    for sql in INDEXES:
        try:
            conn.execute(sql)
        except _pg.errors.UniqueViolation:
            continue  # another worker made it at the same moment


_CLAIM = """
WITH next AS (
  SELECT o.op_id FROM outbox o
  WHERE o.state IN ('owed', 'intent') AND (o.lease_until IS NULL OR o.lease_until < now())
    AND (%(trunk)s::text IS NULL OR o.trunk = %(trunk)s::text)
    AND (%(record)s::bytea IS NULL OR o.record = %(record)s::bytea)
    AND NOT EXISTS (SELECT 1 FROM outbox p WHERE p.record = o.record AND p.trunk = o.trunk
                    AND p.position < o.position AND p.state NOT IN ('done', 'failed'))
  ORDER BY o.seq LIMIT 1 FOR UPDATE OF o SKIP LOCKED)
UPDATE outbox SET worker = %(worker)s, lease_until = now() + make_interval(secs => %(lease)s),
                  epoch = outbox.epoch + 1
FROM next WHERE outbox.op_id = next.op_id
RETURNING outbox.op_id, outbox.trunk, outbox.record, outbox.position, outbox.effect, outbox.tier, outbox.state,
  outbox.epoch, outbox.worker, outbox.outcome, outbox.seq,
  (extract(epoch from (now() - outbox.updated)) * 1000)::bigint AS age_ms, true AS expired
"""


def claim(
    conn: Conn, worker: str, lease_s: float, *, trunk: str | None = None, record: Hash | None = None
) -> Row | None:
    """Claim the next sendable row (oldest commit first; a record's positions in order), skipping rows
    another claim holds: owed rows, and rows left in `intent` whose lease ran out (a takeover). The
    returned row carries the state it had and the new epoch; None when nothing is claimable now."""
    found = conn.execute(
        _CLAIM,
        {"trunk": trunk, "record": None if record is None else bytes(record), "worker": worker, "lease": lease_s},
    ).fetchone()
    return None if found is None else _row(found)


def _fenced(conn: Conn, row: Row, what: str) -> StaleEpoch:
    now = conn.execute("SELECT epoch, worker FROM outbox WHERE op_id = %s", (row.op,)).fetchone()
    epoch, holder = (int(now["epoch"]), str(now["worker"] or "")) if now is not None else (-1, "")
    return StaleEpoch(
        f"operation {row.op}: this worker's claim (epoch {row.epoch}) was taken over by "
        f"{holder or 'another claim'} (epoch {epoch}) after its lease ran out; its {what} was not "
        "written and this worker stops",
        op=row.op,
        epoch=row.epoch,
        current=epoch,
    )


def intent(conn: Conn, row: Row, lease_s: float, attempt: int, note: str) -> None:
    """Make the intent durable under the claim's epoch (and renew its lease) before anything is sent;
    E016 if the claim was fenced."""
    doc = json.dumps(
        {"attempt": attempt, "note": note, "worker": row.worker, "intent_note": note, "intent_epoch": row.epoch}
    )
    done = conn.execute(
        "UPDATE outbox SET state = 'intent', updated = now(), outcome = %s::jsonb || "
        "jsonb_build_object('intent_ms', (extract(epoch from now()) * 1000)::bigint), "
        "lease_until = now() + make_interval(secs => %s) WHERE op_id = %s AND epoch = %s",
        (doc, lease_s, row.op, row.epoch),
    )
    if done.rowcount != 1:
        raise _fenced(conn, row, "intent")


_KEEP_INTENT = (
    "jsonb_strip_nulls(jsonb_build_object('intent_note', outcome->'intent_note', "
    "'intent_ms', outcome->'intent_ms', 'intent_epoch', outcome->'intent_epoch'))"
)
"""The last intent's note and time, kept beside the outcome that replaces it (`reel ops show`)."""


def settle(conn: Conn, row: Row, fate: str, outcome: dict[str, Any]) -> None:
    """Write the outcome (`fate`: one of the adapter fates) under the claim's epoch and free the row;
    E016 if the claim was fenced."""
    doc = json.dumps({**outcome, "state": fate}, default=str, sort_keys=True)
    done = conn.execute(
        f"UPDATE outbox SET state = %s, outcome = {_KEEP_INTENT} || %s::jsonb, updated = now(), "
        "lease_until = NULL WHERE op_id = %s AND epoch = %s",
        (ROW_STATE[fate], doc, row.op, row.epoch),
    )
    if done.rowcount != 1:
        raise _fenced(conn, row, f"outcome ({fate})")


def release(conn: Conn, row: Row, after_s: float) -> None:
    """Give the row back unchanged, claimable again in `after_s` seconds (0: at once)."""
    conn.execute(
        "UPDATE outbox SET lease_until = now() + make_interval(secs => %s) WHERE op_id = %s AND epoch = %s",
        (after_s, row.op, row.epoch),
    )


def rows(conn: Conn, *, unresolved: bool = False) -> list[Row]:
    """Every row, oldest commit first (only those not settled, with `unresolved`)."""
    where = " WHERE state NOT IN ('done', 'failed')" if unresolved else ""
    return [_row(d) for d in conn.execute(f"SELECT {_COLUMNS} FROM outbox{where} ORDER BY seq").fetchall()]


def record_rows(conn: Conn, trunk: str, record: Hash) -> list[Row]:
    """The rows of one record, by position."""
    return [
        _row(d)
        for d in conn.execute(
            f"SELECT {_COLUMNS} FROM outbox WHERE trunk = %s AND record = %s ORDER BY position", (trunk, bytes(record))
        ).fetchall()
    ]


def find(conn: Conn, name: str) -> Row:
    """A row by operation id or unique prefix (with or without `op_`)."""
    want = name if name.startswith("op_") else "op_" + name
    if len(want) < 7:
        raise BadInput(f"operation id {name!r} is too short: give at least 4 hex digits")
    hits = [
        _row(d)
        for d in conn.execute(
            f"SELECT {_COLUMNS} FROM outbox WHERE op_id LIKE %s ORDER BY seq LIMIT 6",
            (want.replace("%", "").replace("_", r"\_") + "%",),
        ).fetchall()
    ]
    if not hits:
        raise NotFound(f"no operation {name}")
    if len(hits) > 1:
        raise BadInput(f"operation prefix {name} is ambiguous: {', '.join(r.op for r in hits[:5])}")
    return hits[0]


def decide(conn: Conn, row: Row, fate: str, outcome: dict[str, Any]) -> None:
    """An operator's settlement of `row` as read: raises its epoch (fencing any worker still holding it)
    and writes `fate`, unless the row moved since it was read (E002: read it again)."""
    doc = json.dumps({**outcome, "state": fate}, default=str, sort_keys=True)
    done = conn.execute(
        f"UPDATE outbox SET state = %s, outcome = {_KEEP_INTENT} || %s::jsonb, updated = now(), "
        "lease_until = NULL, epoch = epoch + 1 WHERE op_id = %s AND epoch = %s AND state = %s",
        (ROW_STATE[fate], doc, row.op, row.epoch, row.state),
    )
    if done.rowcount != 1:
        raise Conflict(
            f"operation {row.op} changed while it was being settled (a worker claimed or settled it); "
            "look again with `reel ops show`",
            op=row.op,
        )


def rearm(conn: Conn) -> list[Row]:
    """For recovery: make not-sent rows owed again (nothing of them left) and unknown rows of a tier that
    can be resumed (keyed, queryable) claimable again as expired intents; blind ones stay unknown. Each
    rearmed row's epoch rises, fencing whoever held it. Returns the rows rearmed."""
    found = conn.execute(
        f"UPDATE outbox SET state = CASE WHEN state = 'not_sent' THEN 'owed' ELSE 'intent' END, lease_until = NULL, "
        f"epoch = epoch + 1 WHERE state = 'not_sent' OR (state = 'unknown' AND tier <> 'blind') RETURNING {_COLUMNS}"
    ).fetchall()
    return [_row(d) for d in found]


def listen(url: str) -> Conn:
    """A new connection listening on the outbox channel."""
    conn = connect(url)
    try:
        conn.execute(f"LISTEN {CHANNEL}")
    except _pg.Error:
        conn.close()
        raise
    return conn


def wait(conn: Conn, timeout_s: float) -> bool:
    """Block until a commit notifies the channel or `timeout_s` passes; True if woken by a notice."""
    for _ in conn.notifies(timeout=timeout_s, stop_after=1):
        return True
    return False


def parse_lease(text: str | float, field: str = "--lease") -> float:
    """A lease in seconds, from 0.05 to a day (E014 naming `field` otherwise)."""
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise BadInput(f"{field} {text!r} is not a number of seconds", field=field) from None
    if not 0.05 <= value <= 86400:
        raise BadInput(f"{field} {text!r} must be between 0.05 and 86400 seconds", field=field)
    return value
