"""The operation log (`.reel/logs/OPS`): every ref transaction that moved a ref, and every fork, commit
and abort of a view, as one JSON line each, in the order they happened.

A ref transaction writes its line itself (`RefTransaction.commit`, through `Repo`), while it still holds
its refs' locks, so the lines of one ref are in the order that ref moved whatever process moved it. A
line names its operation: the verbs that move several refs in several transactions (a commit advances
its trunk, then retires its view) run inside `operation(VERB)`, so their lines share one operation id
and `reel undo` reverts them together. Outside one, each transaction is an operation of its own, named
by the first word of its reflog message.

A view's ref is deleted when it ends, so the ref alone cannot tell "never existed" (E001) from "already
committed or aborted" (E008): the `mark` lines (`VerbLog`) answer that. The log is an audit trail, not a
gc root. Drain refs are not logged: the journal's chained entries are their own log.

Durability: the log is the durability point of the refs it logs. A transaction's line is appended and
fsynced (when the store fsyncs) before its refs are renamed into place, and those ref files are then
written without fsyncs of their own: a ref write lost to a crash or a power cut is redone from its line
(`DiskRefStore.recover`, at open, and by a writer that breaks a dead holder's lock). A commit's mark
rides in the same append as its trunk move (`riding`), so a small commit fsyncs this file once. An
abort's mark is fsynced; a fork's mark rides on the next fsync of the file.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from reelstore.backend.state_files import StateFiles
from reelstore.objects import Hash

FILE = "logs/OPS"
TERMINAL_VERBS = ("commit", "abort")
UNLOGGED = ("refs/drains/",)
"""Ref namespaces whose moves are not logged here (a drain ref caches its journal, its own log)."""

_current: ContextVar[tuple[str, str] | None] = ContextVar("reel_operation", default=None)
_riding: ContextVar[OpLine | None] = ContextVar("reel_riding_mark", default=None)


def new_id() -> str:
    """A fresh operation id: 12 random hex digits."""
    return os.urandom(6).hex()


@contextmanager
def operation(verb: str) -> Iterator[str]:
    """Run the block (or, as a decorator, the function) as one operation named `verb`: every ref
    transaction and mark inside gets its id. Inside another operation, the outer one goes on."""
    outer = _current.get()
    if outer is not None:
        yield outer[0]
        return
    op = new_id()
    token = _current.set((op, verb))
    try:
        yield op
    finally:
        _current.reset(token)


@contextmanager
def riding(verb: str, name: str, view_id: Hash, detail: str = "") -> Iterator[None]:
    """Inside the block, the next logged ref transaction writes mark (`verb`, view `name`) in the same
    append as its own line: one fsync makes both durable (a commit's trunk move and its commit mark)."""
    op = (_current.get() or (new_id(), verb))[0]
    token = _riding.set(OpLine(op, _now(), verb, "", f"{verb} {name}", view=name, view_id=view_id.hex(), detail=detail))
    try:
        yield
    finally:
        _riding.reset(token)


@dataclass(frozen=True)
class RefMove:
    """One ref's change: `old` or `new` None for a ref created or deleted."""

    ref: str
    old: Hash | None
    new: Hash | None


@dataclass(frozen=True)
class OpLine:
    """One line of the log: a ref transaction's moves, or (with `view` set) a view's fork, commit or abort."""

    op: str
    time_ms: int
    verb: str
    principal: str
    message: str
    moves: tuple[RefMove, ...] = ()
    view: str = ""
    view_id: str = ""
    detail: str = ""

    def doc(self) -> dict[str, object]:
        out: dict[str, object] = {
            "op": self.op,
            "time": self.time_ms,
            "verb": self.verb,
            "principal": self.principal,
            "message": self.message,
        }
        if self.view:
            out.update(view=self.view, view_id=self.view_id, detail=self.detail)
        else:
            out["refs"] = [[m.ref, _hex(m.old), _hex(m.new)] for m in self.moves]
        return out


@dataclass(frozen=True)
class Operation:
    """The lines of one operation id, oldest first: what `reel op log` shows and `reel undo` reverts."""

    id: str
    lines: tuple[OpLine, ...]

    @property
    def verb(self) -> str:
        return self.lines[0].verb

    @property
    def time_ms(self) -> int:
        return self.lines[-1].time_ms

    @property
    def principal(self) -> str:
        return self.lines[0].principal

    @property
    def message(self) -> str:
        return next((line.message for line in self.lines if not line.view), self.lines[0].message)

    def net(self) -> list[RefMove]:
        """Each ref it moved, from its value before the operation to its value after, by name."""
        first: dict[str, Hash | None] = {}
        last: dict[str, Hash | None] = {}
        for line in self.lines:
            for m in line.moves:
                first.setdefault(m.ref, m.old)
                last[m.ref] = m.new
        return [RefMove(ref, first[ref], last[ref]) for ref in sorted(first) if first[ref] != last[ref]]


class OpLog:
    """A store's operation log, with the newest mark per view name kept up to date from the file's tail."""

    def __init__(self, files: StateFiles) -> None:
        self.files = files
        self._offset = 0
        self._last: dict[str, OpLine] = {}
        self._guard = threading.Lock()

    def record(self, message: str, principal: str, moves: Sequence[RefMove], *, durable: bool = True) -> bool:
        """Log one ref transaction's moves (nothing if it moved only unlogged refs), with the mark riding
        on it if one is set (`riding`); True if every move is now durable here (the refs need no fsync)."""
        kept = tuple(m for m in moves if not m.ref.startswith(UNLOGGED))
        if not kept:
            return False
        op, verb = _current.get() or (new_id(), (message.split() or ["update-ref"])[0].rstrip(":"))
        data = encode(OpLine(op, _now(), verb, principal, message, kept))
        mark = _riding.get()
        if mark is not None:
            _riding.set(None)
            data += encode(mark)
        self.files.append(FILE, data, durable=durable)
        return durable and len(kept) == len(moves)

    def mark(
        self, verb: str, name: str, view_id: Hash, detail: str = "", principal: str = "", time_ms: int | None = None
    ) -> None:
        """Log that view `name` was forked, committed or aborted (see `VerbLog.append` for durability)."""
        op = (_current.get() or (new_id(), verb))[0]
        line = OpLine(
            op,
            _now() if time_ms is None else time_ms,
            verb,
            principal,
            f"{verb} {name}",
            view=name,
            view_id=view_id.hex(),
            detail=detail,
        )
        self._append(line, durable=verb in TERMINAL_VERBS)

    def _append(self, line: OpLine, *, durable: bool) -> None:
        self.files.append(FILE, encode(line), durable=durable)

    def lines(self) -> Iterator[OpLine]:
        """Every line, oldest first (a line cut short by a crash is skipped)."""
        return _parse(self.files.read(FILE) or b"")

    def operations(self) -> list[Operation]:
        """Every operation that moved a ref, oldest first, by the position of its newest line."""
        grouped: dict[str, list[OpLine]] = {}
        for line in self.lines():
            grouped.setdefault(line.op, []).append(line)
            grouped[line.op] = grouped.pop(line.op)  # keep the dict ordered by newest line
        return [Operation(op, tuple(lines)) for op, lines in grouped.items() if any(x.moves for x in lines)]

    def last_mark(self, name: str) -> OpLine | None:
        """The newest fork, commit or abort mark of a view called `name`."""
        with self._guard:
            new = self.files.tail(FILE, self._offset)
            if new is None:  # the file was replaced: read it again from the start
                self._offset, self._last = 0, {}
                new = self.files.tail(FILE, 0) or b""
            end = new.rfind(b"\n") + 1  # a line still being written is read next time
            for line in _parse(new[:end]):
                if line.view:
                    self._last[line.view] = line
            self._offset += end
            return self._last.get(name)


def encode(line: OpLine) -> bytes:
    """`line` as the log holds it: one JSON object (keys sorted, UTF-8) and a newline."""
    return (json.dumps(line.doc(), separators=(",", ":"), ensure_ascii=False, sort_keys=True) + "\n").encode()


def _now() -> int:
    return int(time.time() * 1000)


def _hex(h: Hash | None) -> str | None:
    return None if h is None else h.hex()


def _hash(value: object) -> Hash | None:
    return Hash.from_hex(value) if isinstance(value, str) else None


def _parse(data: bytes) -> Iterator[OpLine]:
    for raw in data.splitlines():
        try:
            doc = json.loads(raw)
            moves = tuple(RefMove(str(r), _hash(o), _hash(n)) for r, o, n in doc.get("refs", ()))
            yield OpLine(
                str(doc["op"]),
                int(doc["time"]),
                str(doc["verb"]),
                str(doc["principal"]),
                str(doc["message"]),
                moves,
                str(doc.get("view", "")),
                str(doc.get("view_id", "")),
                str(doc.get("detail", "")),
            )
        except (ValueError, KeyError, TypeError):
            continue
