"""What this store knows about each remote, kept in `.reel/sync/state.db` (SQLite).

Three facts per remote make a push cost O(new objects) and make its compare-and-swap possible:
- `known`: reel ids the remote holds (everything in the ancestry of the sync commits we pushed or
  received), so a push walks from its ref targets and stops at the first object already there;
- `seen`: for each remote ref, the sync commit and reel target this store last saw it hold, which is
  the expected old value of the next push to that ref;
- `commits`: the sync commits we pushed or received, with the refs each one records, and which of
  them are tips (the parents of our next sync commit, the haves of our next fetch).
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from reelstore.backend.repo import Repo
from reelstore.errors import BadInput, StorageError
from reelstore.objects import Hash
from reelstore.objects.ref import check_ref_name

_SCHEMA = """
CREATE TABLE IF NOT EXISTS known (remote TEXT NOT NULL, id BLOB NOT NULL, PRIMARY KEY (remote, id)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS seen (
    remote TEXT NOT NULL, ref TEXT NOT NULL, git_commit TEXT NOT NULL, target BLOB NOT NULL,
    PRIMARY KEY (remote, ref)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS commits (
    remote TEXT NOT NULL, git_commit TEXT NOT NULL, refs TEXT NOT NULL, tip INTEGER NOT NULL,
    PRIMARY KEY (remote, git_commit)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS urls (remote TEXT PRIMARY KEY, url TEXT NOT NULL) WITHOUT ROWID;
"""
_IDS = (
    "WITH RECURSIVE side(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM side WHERE i + 1 < ?4), "
    "ids(i) AS (SELECT high.i * ?4 + low.i FROM side AS high, side AS low WHERE high.i * ?4 + low.i < ?1) "
)
"""The positions 0 .. ?1-1 of the 32-byte ids laid end to end in parameter ?3, made as the pairs of a
recursive count to ?4 (about the square root of ?1): half the cost of counting to ?1 one step at a time."""
_TABLES = ("known", "seen", "commits", "urls")


@dataclass(frozen=True, slots=True)
class Seen:
    """A remote ref as this store last saw it."""

    git_commit: str
    target: Hash


class SyncState:
    """One connection per command; every change is made inside `with state:` (one SQLite transaction)."""

    def __init__(self, repo: Repo) -> None:
        directory = repo.files.directory("sync", "sync")
        try:
            self.db = sqlite3.connect(directory / "state.db", timeout=30, isolation_level=None)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.executescript(_SCHEMA)
        except sqlite3.Error as exc:
            raise StorageError(f"cannot open sync state: {exc}") from None

    def __enter__(self) -> SyncState:
        self.db.execute("BEGIN IMMEDIATE")
        return self

    def __exit__(self, exc_type: object, *_: object) -> None:
        self.db.execute("ROLLBACK" if exc_type else "COMMIT")

    def close(self) -> None:
        self.db.close()

    def bind(self, remote: str, url: str) -> None:
        """Facts about a remote hold for one URL: if the remote now names another URL, forget them. When
        the URL is the one recorded (every push but a remote's first), nothing is written: no
        transaction, no fsync."""
        row = self.db.execute("SELECT url FROM urls WHERE remote = ?", (remote,)).fetchone()
        if row is not None and row[0] == url:
            return
        with self:
            row = self.db.execute("SELECT url FROM urls WHERE remote = ?", (remote,)).fetchone()
            if row is not None and row[0] != url:
                self.forget(remote)
            self.db.execute("INSERT OR REPLACE INTO urls VALUES (?, ?)", (remote, url))

    def known(self, remote: str, ids: Iterable[bytes]) -> set[bytes]:
        """The subset of `ids` the remote is known to hold (as plain bytes: they compare and hash as
        the ids do). The ids go to SQLite as one blob, split there (`_IDS`): no statement per id."""
        blob = b"".join(ids)
        if not blob:
            return set()
        rows = self.db.execute(
            _IDS + "SELECT known.id FROM ids JOIN known ON known.remote = ?2 AND known.id = "
            "substr(?3, ids.i * 32 + 1, 32)",
            _id_params(remote, blob),
        )
        return {row[0] for row in rows}

    def knows_any(self, remote: str) -> bool:
        """Is the remote known to hold anything? (Not before a first push or fetch: then a walk need
        not ask `known` about each level.)"""
        return self.db.execute("SELECT 1 FROM known WHERE remote = ? LIMIT 1", (remote,)).fetchone() is not None

    def add_known(self, remote: str, ids: Iterable[bytes]) -> None:
        """Record that the remote holds `ids`: one statement, the ids split from one blob in SQLite (a
        row per id from Python costs twice as much), in key order (the table's B-tree then grows at
        its end, a quarter cheaper than in random order)."""
        blob = b"".join(sorted(ids))
        if blob:
            self.db.execute(
                _IDS + "INSERT OR IGNORE INTO known SELECT ?2, substr(?3, ids.i * 32 + 1, 32) FROM ids",
                _id_params(remote, blob),
            )

    def seen(self, remote: str) -> dict[str, Seen]:
        rows = self.db.execute("SELECT ref, git_commit, target FROM seen WHERE remote = ?", (remote,))
        return {ref: Seen(commit, Hash(target)) for ref, commit, target in rows}

    def set_seen(self, remote: str, ref: str, seen: Seen) -> None:
        self.db.execute(
            "INSERT OR REPLACE INTO seen VALUES (?, ?, ?, ?)", (remote, ref, seen.git_commit, bytes(seen.target))
        )

    def commit_refs(self, remote: str, git_commit: str) -> dict[str, Hash] | None:
        """The refs a known sync commit records, or None if we never saw that commit."""
        row = self.db.execute(
            "SELECT refs FROM commits WHERE remote = ? AND git_commit = ?", (remote, git_commit)
        ).fetchone()
        return None if row is None else parse_refs(row[0].encode())

    def tips(self, remote: str) -> list[str]:
        rows = self.db.execute(
            "SELECT git_commit FROM commits WHERE remote = ? AND tip = 1 ORDER BY git_commit", (remote,)
        )
        return [row[0] for row in rows]

    def add_commits(self, remote: str, commits: dict[str, tuple[dict[str, Hash], list[str]]]) -> None:
        """Record sync commits (id → (refs, parents)); they become tips and their parents stop being tips."""
        self.db.executemany(
            "INSERT OR IGNORE INTO commits VALUES (?, ?, ?, 1)",
            ((remote, cid, format_refs(refs).decode()) for cid, (refs, _) in commits.items()),
        )
        self.db.executemany(
            "UPDATE commits SET tip = 0 WHERE remote = ? AND git_commit = ?",
            ((remote, p) for _, parents in commits.values() for p in parents),
        )

    def drop_seen(self, remote: str, ref: str) -> None:
        """The remote no longer holds `ref` (we deleted it, or a fetch found it gone)."""
        self.db.execute("DELETE FROM seen WHERE remote = ? AND ref = ?", (remote, ref))

    def forget_haves(self, remote: str) -> None:
        """Drop which objects and sync commits the remote holds, keeping what each ref was last seen
        at (the expected values of the next compare-and-swap): the remote pruned some of them."""
        for table in ("known", "commits"):
            self.db.execute(f"DELETE FROM {table} WHERE remote = ?", (remote,))

    def rename(self, old: str, new: str) -> None:
        """Every fact about remote `old` is now about `new` (`reel remote rename`). Facts left under
        `new` (by a remote of that name removed without them) are dropped first, but only while `old`
        has facts to move, so a rename repeated after a crash keeps what the first one moved."""
        if not any(self.db.execute(f"SELECT 1 FROM {t} WHERE remote = ? LIMIT 1", (old,)).fetchone() for t in _TABLES):
            return
        self.forget(new)
        for table in _TABLES:
            self.db.execute(f"UPDATE {table} SET remote = ? WHERE remote = ?", (new, old))

    def forget(self, remote: str) -> None:
        """Drop everything known about a remote (it was removed, or it was emptied and recreated)."""
        for table in _TABLES:
            self.db.execute(f"DELETE FROM {table} WHERE remote = ?", (remote,))


def _id_params(remote: str, blob: bytes) -> tuple[int, str, bytes, int]:
    """The parameters of an `_IDS` statement over `blob`, 32-byte ids end to end."""
    n = len(blob) // 32
    return n, remote, blob, math.isqrt(n - 1) + 1


def format_refs(refs: dict[str, Hash]) -> bytes:
    """The `refs` file of a sync commit: `<reel id> <ref name>` lines, sorted by name."""
    return b"".join(f"{refs[name].hex()} {name}\n".encode() for name in sorted(refs))


def parse_refs(data: bytes) -> dict[str, Hash]:
    """Strict inverse of `format_refs` (E007 on anything else: it came from a remote)."""
    refs: dict[str, Hash] = {}
    try:
        for line in data.decode("ascii").splitlines():
            hexid, sep, name = line.partition(" ")
            if not sep or name in refs or name.startswith("refs/remotes/"):
                raise BadInput(f"bad line {line!r}")
            refs[check_ref_name(name)] = Hash.from_hex(hexid)
    except (UnicodeDecodeError, BadInput) as exc:
        raise StorageError(f"remote sent a malformed refs file: {exc}") from None
    if format_refs(refs) != data:
        raise StorageError("remote sent a refs file that is not in canonical form")
    return refs


FETCH_LOCK = "sync/fetch.lock"
FETCH_LOCK_WAIT = 300.0
"""Seconds a fetch waits for another fetch of the same store before it gives up (E002)."""


@contextmanager
def fetch_lock(repo: Repo) -> Iterator[None]:
    """The store's fetch lock (an `flock`: a killed holder releases it), held by a fetch for its whole
    run and by a push while it moves remote-tracking refs, so two processes sharing one store take
    turns there instead of one failing on a ref lock the other holds."""
    repo.files.directory("sync", "sync")
    with repo.files.lock(FETCH_LOCK, FETCH_LOCK_WAIT):
        yield
