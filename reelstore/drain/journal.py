"""The drain journal of a trunk: a hash chain of `journal` entries under `refs/drains/<trunk>`.

Appending is the one durable step of the drain, so it carries every guard: under the store's drain
lock it checks the drainer's epoch (a fenced drainer cannot journal) and compares the operation's
newest entry with the one the drainer last saw (a per-operation compare-and-swap: two drainers can
never both record an intent for the same send).

On disk, an append is one frame of the trunk's journal segment (`objects/journal/<trunk>.seg`, see
`backend.segment`) and one fsync: the outcome of effect i and the intent of effect i+1 go in the same
frame, so a drain of N effects costs N + 1 fsyncs. The segment is the durable record and its newest
entry is the journal's head; `refs/drains/<trunk>` follows it without an fsync of its own (a cache for
gc, fsck and the reflog-less readers that start from refs): a drain moves it every few appends and at
its end (`append(follow=...)`), and forward at the next drain if a crash left it behind. The chain
stays hash-verified: each entry names its `prev` by id, and every read re-hashes. A store in memory
keeps the journal as objects and a ref. On disk, a drain ref naming an entry its segment does not hold
is a lost entry (E007), wherever else that entry may be.

Once a trunk's journal holds an entry, the state file `journals/<trunk>` says so. A journal that is
gone altogether (segment and ref deleted) then reads as E007, not as "nothing was ever sent": without
that mark, recovery would take every effect of the trunk for unsent and send a blind one again.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from reelstore.backend.object_store import expect_kind
from reelstore.backend.segment import Segment
from reelstore.codec import freeze
from reelstore.crashpoints import crash_point
from reelstore.drain import epoch as epochs
from reelstore.errors import Conflict, NotFound, StorageError
from reelstore.objects import Hash, Journal

if TYPE_CHECKING:
    from reelstore.backend.repo import Repo

FINAL = ("succeeded", "failed", "absent")


def ref_name(trunk: str) -> str:
    return f"refs/drains/{trunk}"


def _wall_ms() -> int:
    return int(time.time() * 1000)


clock: Callable[[], int] = _wall_ms
"""Milliseconds for journal entries; the simulator replaces it with its own deterministic clock."""


@dataclass
class JournalIndex:
    """The newest entry of every operation of one trunk, as of `head`."""

    head: Hash | None = None
    latest: dict[str, Journal] = field(default_factory=dict)
    count: int = 0
    epoch: int = 0
    """The highest epoch any entry was journaled under."""

    def apply(self, entry: Journal) -> None:
        self.latest[entry.op] = entry
        self.head = entry.id
        self.count += 1
        self.epoch = max(self.epoch, entry.epoch)


def _indexes(repo: Repo) -> dict[str, JournalIndex]:
    """Per open store: the journal index of each trunk, as this process last built it."""
    return {}


def walk(repo: Repo, head: Hash | None, stop: Hash | None = None) -> Iterator[Journal]:
    """Entries from `head` back to (not including) `stop`, newest first. E007 if the chain is broken."""
    seen = 0
    while head is not None and head != stop:
        try:
            obj = repo.objects.get(head)
        except NotFound:
            raise StorageError(f"the journal chain is broken: entry {head.hex()} is missing") from None
        entry = expect_kind(obj, Journal)
        yield entry
        head = entry.prev
        seen += 1
        if seen > 1 << 40:
            raise StorageError("journal chain does not end")


def mark_name(trunk: str) -> str:
    """The state file that says trunk `trunk` has journaled drains."""
    return f"journals/{trunk}"


def _marked(repo: Repo) -> set[str]:
    """Per open store: the trunks this process has seen marked."""
    return set()


def _mark(repo: Repo, trunk: str) -> None:
    """Write the trunk's mark if it is not there yet. Called after an entry is durable (a crash before
    the mark leaves a journal without one, never a mark without a journal)."""
    done = repo.attached(_marked)
    if trunk in done:
        return
    name = mark_name(trunk)
    if repo.files.read(name) is None:
        repo.files.write(
            name, f"trunk {trunk} has a drain journal ({ref_name(trunk)}); it must never vanish\n".encode()
        )
    done.add(trunk)


def _segment(repo: Repo, trunk: str) -> Segment | None:
    """The trunk's journal segment, for a store on disk."""
    return repo.objects.segment(trunk)


RESTORE = (
    "without its lost entries an effect already sent would look unsent. Copy the journal "
    "(.reel/objects/journal/) back from the store or backup it came from, one holding at least the entries "
    "named, then run `reel fsck`"
)


def head_of(repo: Repo, trunk: str) -> Hash | None:
    """The journal's newest entry: the segment's last one (the ref may lag it after a crash), else the
    ref (a store in memory, whose journal is objects and the ref)."""
    seg = _segment(repo, trunk)
    head = repo.refs.get(ref_name(trunk))
    if seg is not None:
        seg.refresh()
        gone = seg.tail is None and head is None and repo.files.read(mark_name(trunk)) is not None
        if seg.problem is not None and not gone:  # a journal gone whole is said so below
            raise StorageError(
                f"the journal segment of trunk {trunk} is damaged ({seg.problem}). Nothing is "
                f"drained or resent until it is repaired: {RESTORE}",
                trunk=trunk,
            )
        if head is not None and head not in seg.where:
            raise StorageError(
                f"the journal segment of trunk {trunk} lost entries: {ref_name(trunk)} names entry "
                f"{head.hex()}, which the segment does not hold (it holds {len(seg.order)}). Nothing "
                f"is drained or resent until it is restored: {RESTORE}",
                trunk=trunk,
                entry=head.hex(),
            )
        if seg.tail is not None:
            return seg.tail
    if head is None and repo.files.read(mark_name(trunk)) is not None:
        raise StorageError(
            f"the drain journal of trunk {trunk} is missing: {repo.files.where(mark_name(trunk))} "
            f"says it has entries, but neither its segment nor {ref_name(trunk)} is there. Nothing "
            "is drained or resent until it is restored from a copy of this store: without it an "
            "effect already sent would look unsent",
            trunk=trunk,
        )
    return head


def index(repo: Repo, trunk: str) -> JournalIndex:
    """The trunk's journal index, brought up to date incrementally from the last one this process built."""
    head = head_of(repo, trunk)
    per_repo = repo.attached(_indexes)
    cached = per_repo.get(trunk)
    if cached is not None and cached.head == head:
        return cached
    stop = cached.head if cached is not None else None
    new: list[Journal] = []
    for entry in walk(repo, head):
        if entry.id == stop:
            break
        new.append(entry)
    else:
        cached = None  # `stop` is not on the chain (or there was none): index it from the start
    if cached is None:
        cached = JournalIndex()
    for entry in reversed(new):
        cached.apply(entry)
    per_repo[trunk] = cached
    return cached


def known(repo: Repo, trunk: str) -> JournalIndex:
    """The trunk's journal index as this process last built or appended to it, without looking at the
    segment again (`index` if there is none yet): what a drain reads between its own appends. Another
    drainer's entry made meanwhile is caught by `append`, which checks every step against a fresh index
    under the drain lock."""
    cached = repo.attached(_indexes).get(trunk)
    return cached if cached is not None else index(repo, trunk)


@dataclass(frozen=True)
class Step:
    """One journal entry to write: a state of operation `op`, expected to follow its entry `expect`."""

    record: Hash
    index: int
    effect: Hash
    op: str
    state: str
    expect: Hash | None
    receipt: Mapping[str, Any] | None = None
    note: str = ""
    finding: Hash | None = None


def append(
    repo: Repo, trunk: str, epoch: int, *steps: Step, principal: str = "reel drain", follow: bool = True
) -> list[Journal]:
    """Durably journal `steps` in order, with one ref update: E016 if `epoch` is fenced, E002 if an
    operation moved past what its step expects (nothing is written then). Without `follow`, a store
    on disk leaves the drain ref where it is (the segment is the record; the caller moves the ref
    later, as a drain does every few entries and at its end)."""
    with epochs.locked(repo):
        epochs.check(repo, epoch)
        idx = index(repo, trunk)
        if idx.epoch > epoch:
            raise StorageError(
                f"the recovery epoch went backwards: {repo.files.where(epochs.FILE)} says {epoch}, but "
                f"the drain journal of trunk {trunk} already holds entries of epoch {idx.epoch} (the "
                "file was restored from an older copy or edited). Nothing is journaled or sent: a "
                f"fenced drainer could act again. Write {idx.epoch + 1} into it, then `reel recover`",
                trunk=trunk,
                epoch=epoch,
                journaled=idx.epoch,
            )
        latest = {s.op: idx.latest[s.op].id for s in steps if s.op in idx.latest}
        head, entries = idx.head, []
        for s in steps:
            if latest.get(s.op) != s.expect:
                have = idx.latest.get(s.op)
                shown = f"{have.state} ({have.id.hex()[:12]})" if have is not None else "nothing"
                raise Conflict(f"operation {s.op} moved on under another drainer: its journal shows {shown}", op=s.op)
            entry = Journal(
                head,
                trunk,
                s.record,
                s.index,
                s.effect,
                s.op,
                s.state,
                epoch,
                clock(),
                freeze(s.receipt) if s.receipt is not None else None,
                s.note,
                s.finding,
            )
            entries.append(entry)
            head = latest[s.op] = entry.id
        what = ", ".join(f"{e.op} {e.state}" for e in entries)
        seg = _segment(repo, trunk)
        if seg is None:
            repo.objects.put_many(entries)
            crash_point("journal:object-written")
            repo.refs.set(ref_name(trunk), entries[-1].id, idx.head, message=f"journal {what}", principal=principal)
        else:
            seg.append([e.encode() for e in entries])
            crash_point("journal:object-written")
            if follow:
                # Under the drain lock no one else moves the drain ref, so whatever it holds (it may lag
                # the segment after a crash) is replaced; the segment is already durable.
                tx = repo.refs.transaction(f"journal {what}", principal, durable=False)
                tx.update(ref_name(trunk), entries[-1].id).commit()
                crash_point("journal:ref-moved")
        _mark(repo, trunk)
        for entry in entries:
            idx.apply(entry)
        return entries


def catch_up(repo: Repo, trunk: str) -> None:
    """Move the drain ref to the segment's newest entry if a crash left it behind (without an fsync:
    the segment is the durable record). Under the drain lock, like every journal write."""
    seg = _segment(repo, trunk)
    if seg is None:
        return
    with epochs.locked(repo):
        head = head_of(repo, trunk)
        if head is not None and repo.refs.get(ref_name(trunk)) != head:
            repo.refs.transaction("journal catch up with its segment", "reel drain", durable=False).update(
                ref_name(trunk), head
            ).commit()
