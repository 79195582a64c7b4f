"""Who owns each operation id in this store: the record that committed it, the journal that sent it,
or the abort that discarded its effect.

The drain dedupes by operation id within one trunk's journal; this index makes the identity
store-wide, so that no view brought back (by `update-ref`, a snapshot, a bundle) and no task key
queued again can send an operation a second time. A trunk commit refuses an operation that a record
already holds, that a journal already sent, or whose very effect an aborted view held; the drain
refuses one owned by another record before it journals anything.

Three sources:
- records: every trunk's records, scanned incrementally. What was scanned is cached in the state
  file `ops/committed` (lines `C op trunk record` and `H trunk head`): a cache, which fsck rebuilds;
- journals: each trunk's drain journal (`drain.journal`);
- tombstones: `ops/aborted`, one durable line per operation of each aborted view (`A op effect
  view-object fork view`). Nothing else remembers an abort's effects, so it is the source of truth:
  gc and fsck never drop it. A tombstone names the effect and the aborted view's fork: that view,
  brought back by any path (an old id written to its ref, a bundle made before the abort), can never
  commit it. Two deliberate paths stay open, since each still sends the effect at most once: a
  snapshot restored (a new fork, the protocol's "restore keeps Class C pending for the user"), and a
  task key queued again in a new view after its first view was aborted (a new effect).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from reelstore.drain import journal as drainlog
from reelstore.errors import BadInput, NotFound, StorageError, ViewTerminal
from reelstore.objects import Effect, Effects, Hash, Record, View

if TYPE_CHECKING:
    from reelstore.backend.repo import Repo

COMMITTED = "ops/committed"
ABORTED = "ops/aborted"
MAX_WALK = 1 << 32
"""Bound on the records one catch-up walks (a trunk's chain always ends; this says so)."""


def op_id(effect: Hash, occurrence: int = 0) -> str:
    """The operation id of an effect: stable across attempts, sent as the idempotency key.

    It is derived from the effect object alone (which names the view lineage that admitted it: its
    fork id and its place in that view's buffer), never from the record, so the same queued effect
    has the same id whichever record, rebase, store or machine commits it, and a keyed or queryable
    target can dedupe a second attempt. `occurrence` tells apart identical effect objects in one record.
    """
    return "op_" + Hash.of(b"reel-op2\0" + bytes(effect) + occurrence.to_bytes(8, "big")).hex()[:40]


def task_op_id(trunk: str, key: str) -> str:
    """The operation id of an effect queued with a task key: derived from (trunk, key) alone, so the
    same task queued again, in any view, store or process, has the same id (and idempotency key)."""
    return "op_" + Hash.of(b"reel-task\0" + trunk.encode() + b"\0" + key.encode()).hex()[:40]


def task_key(effect: Effect) -> str:
    """The task key an effect was queued with, or ''."""
    key = effect.meta.get("key", "")
    return key if isinstance(key, str) else ""


def item_ops(repo: Repo, trunk: str, items: tuple[Hash, ...]) -> list[str]:
    """The operation id of each effect in `items` (a record's or a view's buffer) on `trunk`: from its
    task key if it has one, else from the effect and its occurrence among identical ones."""
    seen: dict[Hash, int] = {}
    out = []
    for effect in items:
        occurrence = seen[effect] = seen.get(effect, -1) + 1
        key = task_key(repo.cache.load(effect, Effect))
        out.append(task_op_id(trunk, key) if key else op_id(effect, occurrence))
    return out


@dataclass(frozen=True)
class Owner:
    """What holds an operation id: `fate` is committed, journaled or aborted."""

    op: str
    fate: str
    trunk: str = ""
    record: Hash | None = None
    view: str = ""
    view_object: Hash | None = None

    def describe(self) -> str:
        if self.fate == "aborted":
            where = self.view_object.hex() if self.view_object is not None else "?"
            return f"belongs to view {self.view!r} (view object {where}), which was aborted: its effect was discarded"
        rec = self.record.hex() if self.record is not None else "?"
        if self.fate == "journaled":
            return f"was already drained from record {rec} of trunk {self.trunk} (`reel ops show {self.op}`)"
        return f"is already held by record {rec} of trunk {self.trunk} (`reel ops show {self.op}`)"

    def details(self) -> dict[str, str]:
        out = {"op": self.op, "owner": self.fate}
        if self.record is not None:
            out["record"] = self.record.hex()
        if self.view_object is not None:
            out.update(aborted_view=self.view, view_object=self.view_object.hex())
        return out


@dataclass
class _Index:
    committed: dict[str, tuple[str, Hash]] = field(default_factory=dict)
    """op -> (trunk, the oldest record scanned that carries it)."""
    heads: dict[str, Hash] = field(default_factory=dict)
    aborted: dict[tuple[str, Hash, str], tuple[str, Hash]] = field(default_factory=dict)
    """(op, effect, fork) -> (view name, view object)."""
    offsets: dict[str, int] = field(default_factory=lambda: {COMMITTED: 0, ABORTED: 0})
    lock: threading.Lock = field(default_factory=threading.Lock)


def _index(repo: Repo) -> _Index:
    return _Index()


def _read(repo: Repo, idx: _Index) -> None:
    """Take in the whole lines appended to both files since this process last looked."""
    for name in (COMMITTED, ABORTED):
        data = repo.files.tail(name, idx.offsets[name]) or b""
        end = data.rfind(b"\n") + 1
        for line in data[:end].decode("utf-8", "replace").splitlines():
            _apply(idx, line.split(" ", 5))
        idx.offsets[name] += end


def _apply(idx: _Index, parts: list[str]) -> None:
    """One line; a malformed one (a torn write of the cache) is skipped: the cache is rebuilt by fsck."""
    try:
        if parts[0] == "C" and len(parts) == 4:
            idx.committed.setdefault(parts[1], (parts[2], Hash.from_hex(parts[3])))
        elif parts[0] == "H" and len(parts) == 3:
            idx.heads[parts[1]] = Hash.from_hex(parts[2])
        elif parts[0] == "A" and len(parts) == 6:
            idx.aborted.setdefault((parts[1], Hash.from_hex(parts[2]), parts[4]), (parts[5], Hash.from_hex(parts[3])))
    except (ValueError, BadInput):
        return


def _trunks(repo: Repo) -> list[tuple[str, Hash]]:
    return [(name[len("refs/heads/") :], h) for name, h in repo.refs.list("refs/heads/")]


def _records(repo: Repo, head: Hash, stop: Hash | None) -> Iterator[tuple[Hash, Record]]:
    h: Hash | None = head
    for _ in range(MAX_WALK):
        if h is None or h == stop:
            return
        try:
            rec = repo.cache.load(h, Record)
        except NotFound:
            return  # a shallow history: what is not here was never committed here
        yield h, rec
        h = rec.parent
    raise StorageError(f"the record chain from {head.hex()} does not end")


def record_lines(repo: Repo, trunk: str, head: Hash, stop: Hash | None) -> list[str]:
    """The index lines of the records from `head` back to `stop`, oldest first, then the new head."""
    found: list[list[str]] = []
    for rid, rec in _records(repo, head, stop):
        if rec.effects is None:
            continue
        items = repo.cache.load(rec.effects, Effects).items
        found.append([f"C {op} {trunk} {rid.hex()}\n" for op in item_ops(repo, trunk, items)])
    return [line for lines in reversed(found) for line in lines] + [f"H {trunk} {head.hex()}\n"]


def catch_up(repo: Repo) -> _Index:
    """The index with every trunk's records up to its current head (each new one scanned once)."""
    idx = repo.attached(_index)
    with idx.lock:
        _read(repo, idx)
        for trunk, head in _trunks(repo):
            if idx.heads.get(trunk) == head:
                continue
            lines = record_lines(repo, trunk, head, idx.heads.get(trunk))
            repo.files.append(COMMITTED, "".join(lines).encode(), durable=False)
            _read(repo, idx)
    return idx


class Owners:
    """Who holds which operation here, as of one look: the committed-operations cache caught up and
    every trunk's journal index but `journals_of`'s. A verb that asks about many operations (a drain,
    a commit's check) takes one of these instead of listing the trunks and journals per operation."""

    def __init__(self, repo: Repo, journals_of: str | None = None) -> None:
        self.idx = catch_up(repo)
        self.journals: list[tuple[str, drainlog.JournalIndex]] = []
        for name, _ in repo.refs.list("refs/drains/"):
            trunk = name[len("refs/drains/") :]
            if trunk != journals_of:
                self.journals.append((trunk, drainlog.index(repo, trunk)))

    def of(self, op: str, effect: Hash | None = None, fork: str = "") -> Owner | None:
        """What already holds `op`: a record (the oldest), a journal, or the abort of the view of fork
        `fork` whose effect `effect` it was."""
        held = self.idx.committed.get(op)
        if held is not None:
            return Owner(op, "committed", held[0], held[1])
        for trunk, journal in self.journals:
            entry = journal.latest.get(op)
            if entry is not None:
                return Owner(op, "journaled", trunk, entry.record)
        if effect is not None:
            gone = self.idx.aborted.get((op, effect, fork))
            if gone is not None:
                return Owner(op, "aborted", view=gone[0], view_object=gone[1])
        return None

    def foreign(self, record: Hash, op: str) -> Owner | None:
        """For the drain of `record`: an owner of `op` other than this record and its trunk's journal
        (an abort is checked at commit, where the view's fork is known)."""
        found = self.of(op)
        if found is not None and found.fate == "committed" and found.record == record:
            return None
        return found


def owner(
    repo: Repo, op: str, effect: Hash | None = None, fork: str = "", *, journals_of: str | None = ""
) -> Owner | None:
    """What already holds `op` here: a record (the oldest), a journal (of any trunk but `journals_of`,
    when given), or the abort of the view of fork `fork` whose effect `effect` it was."""
    return Owners(repo, journals_of or None).of(op, effect, fork)


def pending_items(repo: Repo, effects: Hash | None) -> tuple[Hash, ...]:
    return () if effects is None else repo.cache.load(effects, Effects).items


def check_commit(repo: Repo, name: str, view: View) -> None:
    """E008, before the commit point, if an operation of view `name`'s pending effects is already
    owned here: committed by a record, drained by a journal, or discarded by an abort of this view."""
    trunk, fork = str(view.meta.get("trunk", "")), str(view.meta.get("fork", "")) or "-"
    items = pending_items(repo, view.effects)
    if not items:
        return
    known = Owners(repo)
    for i, (op, effect) in enumerate(zip(item_ops(repo, trunk, items), items)):
        found = known.of(op, effect, fork)
        if found is not None:
            raise ViewTerminal(
                f"cannot commit view {name!r}: its operation {op} (effect {i}) {found.describe()}; "
                "an operation reaches its target at most once, so nothing was committed. Abort "
                "this view",
                view=name,
                **found.details(),
            )


def check_key(repo: Repo, trunk: str, key: str, op: str) -> None:
    """E008 at admission if task `key`'s operation is already committed or drained on this store."""
    found = owner(repo, op)
    if found is not None:
        raise ViewTerminal(
            f"task key {key!r} on trunk {trunk}: operation {op} {found.describe()}; it is not "
            "queued again (its effect happens at most once)",
            key=key,
            **found.details(),
        )


def tombstone(repo: Repo, name: str, view: View) -> None:
    """Durably remember that the pending effects of view object `view` (view `name`, just aborted)
    are discarded."""
    trunk, fork = str(view.meta.get("trunk", "")), str(view.meta.get("fork", "")) or "-"
    items = pending_items(repo, view.effects)
    if not items:
        return
    lines = [f"A {op} {e.hex()} {view.id.hex()} {fork} {name}\n" for op, e in zip(item_ops(repo, trunk, items), items)]
    repo.files.append(ABORTED, "".join(lines).encode())


def rebuild(repo: Repo) -> int:
    """Rebuild the committed-operations cache from the records (fsck); returns the operations indexed.
    Tombstones are kept as they are: nothing else holds them."""
    lines: list[str] = []
    for trunk, head in _trunks(repo):
        lines += record_lines(repo, trunk, head, None)
    repo.files.write(COMMITTED, "".join(lines).encode())
    idx = repo.attached(_index)
    with idx.lock:
        idx.committed.clear()
        idx.heads.clear()
        idx.offsets[COMMITTED] = 0
        _read(repo, idx)
        return len(idx.committed)


def tombstoned_effects(repo: Repo) -> dict[tuple[str, Hash, str], tuple[str, Hash]]:
    """Every (op, effect, fork) an abort discarded, with its view and view object."""
    idx = catch_up(repo)
    return dict(idx.aborted)
