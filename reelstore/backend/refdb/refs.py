"""The ref store: names under `refs/` pointing at object ids (the name rules live in objects/ref.py).

Every change is a compare-and-swap against an expected old value, taken under a lock file as git does
it: create `NAME.lock` exclusively (it names its holder: pid, host, time), re-read the ref under the
lock, compare, write the new value into a temporary file, append its reflog line and its operation-log
line (fsynced: the durability point of the ref files, which get no fsync of their own; `recover` redoes
a move the log holds that a crash kept from its file), rename the file over the ref, remove the lock.
A multi-ref transaction locks every ref (in name order) and checks every old value before it writes
anything, so a failed check changes nothing. A lock that is already there is reported (it may belong
to a live writer), except one whose holder is provably dead (a process of this host and boot that no
longer runs): the next writer breaks that one, with a line in the operation log (see
backend/refdb/ref_locks), and first redoes the move that holder logged. Any other stale lock (an unknown
holder, or older than the lock timeout) is reported with its remedy; `clear_stale_locks` removes them.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext, suppress
from pathlib import Path

from reelstore.backend.fileio import atomic_write, fsync_dir, pid_alive, temp_name, write_new
from reelstore.backend.inflight import Inflight
from reelstore.backend.op_log import FILE as OPS_FILE
from reelstore.backend.op_log import OpLine, RefMove, encode, new_id
from reelstore.backend.refdb.ref_format import (
    ANY,
    AnyValue,
    NameSet,
    checksum,
    durable_reflog,
    format_loose,
    holder_line,
    is_listable,
    keeps_reflog,
    parse_loose,
    reflog_line,
)
from reelstore.backend.refdb.ref_locks import LOCK_TIMEOUT, LockInfo, Locks, break_dead, lock_conflict, read_lock
from reelstore.backend.refdb.ref_transaction import Owed, RefTransaction, RefUpdate, Updates
from reelstore.backend.refdb.reflog import ReflogEntry, parse_reflog
from reelstore.crashpoints import crash_point
from reelstore.errors import BadInput, Conflict, NotFound, StorageError
from reelstore.objects import Hash
from reelstore.objects.ref import check_ref_name

SYNCED_FILE = "logs/OPS.synced"
"""The checkpoint: the offset in the operation log up to which every ref move is durable in its file."""
CHECKPOINT_BYTES = 16 << 10
"""Log bytes between checkpoints: what `recover` reads at most when a store opens."""

__all__ = [
    "ANY",
    "LOCK_TIMEOUT",
    "DiskRefStore",
    "LockInfo",
    "MemoryRefStore",
    "RefStore",
    "RefTransaction",
    "RefUpdate",
    "ReflogEntry",
    "checksum",
]


Moves = list[RefMove]
"""A transaction's ref moves (named so the annotation is not shadowed by `RefStore.list`)."""


class RefStore:
    """The interface: read, list, compare-and-swap, transactions, reflogs."""

    before_apply: Callable[[], None] | None = None
    """Called once every ref of a transaction is locked and checked, before anything is written: the
    store points it at its object store's `flush`, so a ref never names an object not yet durable and
    a lost race (caught while locking) makes nothing durable."""

    log_moves: Callable[[str, str, list[RefMove], bool], bool] | None = None
    """Called with (message, principal, moves, durable) under a transaction's locks: the store points it
    at its operation log, the one place every ref move is logged. It returns True when the moves are
    durable in the log, which a disk store then uses as their durability point: it calls it before its
    renames and writes the ref files without fsyncs (`DiskRefStore.recover` redoes a lost one)."""

    atomic_outbox = False
    """True for a store that writes a transaction's owed effects (`RefTransaction.owe`) with its refs, in
    one atomic step (a shared database's outbox); the others ignore them."""

    def _owe(self, owed: list[Owed]) -> None:
        """Take the rows `_apply` writes with the refs, if this store keeps an outbox."""

    def queue(self, name: str) -> AbstractContextManager[None]:
        """Wait for this writer's turn to move `name` among the writers that queue for it, for the block
        (a shared store's committers of one trunk). The compare-and-swap still decides; the queue only
        spares them losing it to each other. A store whose writers simply retry has no queue."""
        return nullcontext()

    def _read(self, name: str) -> Hash | None:
        raise NotImplementedError

    def _lock(self, names: list[str]) -> None:
        raise NotImplementedError

    def _unlock(self, names: list[str]) -> None:
        raise NotImplementedError

    def _apply(self, updates: list[RefUpdate], message: str, principal: str, held: set[str]) -> None:
        """Write under the locks in `held` (released by the caller afterwards)."""
        raise NotImplementedError

    def names(self) -> Iterator[str]:
        raise NotImplementedError

    def _names_under(self, prefix: str) -> Iterator[str]:
        """Names that may start with `prefix` (at least every one that does)."""
        return self.names()

    def _settle(self) -> None:
        """A transaction landed: the objects this thread wrote before it are referenced now, or garbage,
        and need no more protection from a concurrent gc (see backend/inflight.py). A failed one settles
        nothing, since its writer may retry it with the objects it already wrote."""

    def reflog(self, name: str) -> list[ReflogEntry]:
        raise NotImplementedError

    def stale_locks(self) -> Locks:
        """Lock files whose holder is dead or that are older than the lock timeout."""
        return []

    def clear_stale_locks(self, force: bool = False) -> Locks:
        """Remove the stale locks whose holder is provably dead; returns them."""
        return []

    def get(self, name: str) -> Hash | None:
        return self._read(check_ref_name(name))

    def __getitem__(self, name: str) -> Hash:
        value = self.get(name)
        if value is None:
            raise NotFound(f"no ref {name}", ref=name)
        return value

    def list(self, prefix: str = "refs/") -> list[tuple[str, Hash]]:
        """Every ref whose name starts with `prefix`, sorted by name."""
        out = []
        for name in sorted(set(self._names_under(prefix))):
            if name.startswith(prefix):
                value = self._read(name)
                if value is not None:
                    out.append((name, value))
        return out

    def _apply_as(
        self, updates: Updates, message: str, principal: str, held: set[str], durable: bool, moves: Moves
    ) -> None:
        """`_apply`, durably or not, then log `moves`; a store without fsyncs has nothing to relax."""
        self._apply(updates, message, principal, held)
        self._log(message, principal, moves, durable)

    def _log(self, message: str, principal: str, moves: Moves, durable: bool) -> bool:
        return bool(moves) and self.log_moves is not None and self.log_moves(message, principal, moves, durable)

    def transaction(
        self, message: str = "", principal: str = "", create_reflog: bool = False, *, durable: bool = True
    ) -> RefTransaction:
        """A transaction; with `create_reflog` every ref it writes gets a reflog, whatever its namespace;
        `durable=False` writes without fsync (see `RefTransaction.durable`)."""
        return RefTransaction(self, message, principal, create_reflog, durable=durable)

    def set(
        self, name: str, new: Hash, old: Hash | None | AnyValue = ANY, message: str = "", principal: str = ""
    ) -> None:
        """Compare-and-swap one ref (old=None: must not exist). E002 if it holds something else."""
        self.transaction(message, principal).update(name, new, old).commit()

    def delete(self, name: str, old: Hash | AnyValue = ANY, message: str = "", principal: str = "") -> None:
        self.transaction(message, principal).delete(name, old).commit()


class MemoryRefStore(RefStore):
    """For tests and embedding. One mutex stands in for the lock files."""

    def __init__(self) -> None:
        self._refs: dict[str, Hash] = {}
        self._logs: dict[str, list[ReflogEntry]] = {}
        self._locked: set[str] = set()
        self._mutex = threading.Lock()

    def _read(self, name: str) -> Hash | None:
        return self._refs.get(name)

    def _lock(self, names: list[str]) -> None:
        with self._mutex:
            busy = [n for n in names if n in self._locked]
            if busy:
                raise Conflict(f"cannot lock ref {busy[0]}: another update holds it", ref=busy[0])
            taken = NameSet([*self._refs, *self._locked])
            for name in names:
                other = taken.conflict(name)
                if other is not None:
                    raise Conflict(f"cannot lock ref {name}: ref {other} is in the way", ref=name)
                taken.add(name)
            self._locked.update(names)

    def _unlock(self, names: list[str]) -> None:
        with self._mutex:
            self._locked.difference_update(names)

    def _apply(self, updates: list[RefUpdate], message: str, principal: str, held: set[str]) -> None:
        now = int(time.time() * 1000)
        for u in updates:
            old = self._refs.get(u.name)
            if u.new is None:
                self._refs.pop(u.name, None)
                self._logs.pop(u.name, None)
            else:
                if keeps_reflog(u.name) or u.create_reflog or u.name in self._logs:
                    self._logs.setdefault(u.name, []).append(ReflogEntry(old, u.new, now, principal, message))
                self._refs[u.name] = u.new

    def names(self) -> Iterator[str]:
        return iter(list(self._refs))

    def reflog(self, name: str) -> list[ReflogEntry]:
        return list(self._logs.get(check_ref_name(name), ()))


class DiskRefStore(RefStore):
    """One file per ref under `refs/`, reflogs under `logs/`, all inside the `.reel` dir."""

    def __init__(self, root: Path, *, fsync: bool = True) -> None:
        self.root = Path(root)
        self.fsync = fsync
        self.inflight: Inflight | None = None
        """The gc fence's registry of this thread's unreferenced writes; set by Repo.open."""
        self._synced_hint = 0
        """The checkpoint as last read: a writer reads the file again only once the log grew past it."""

    def _path(self, name: str) -> Path:
        return self.root / name

    def _settle(self) -> None:
        if self.inflight is not None:
            self.inflight.settle()

    def _log_path(self, name: str) -> Path:
        return self.root / "logs" / name

    def _read(self, name: str) -> Hash | None:
        path = self._path(name)
        try:
            data = path.read_bytes()
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return None
        except OSError as exc:
            raise StorageError(f"cannot read ref {name}: {exc}", ref=name) from None
        return parse_loose(name, data)

    def _lock(self, names: list[str]) -> None:
        taken: list[str] = []
        broke: list[str] = []
        try:
            for name in names:
                self._clear_way(name)
                if self._lock_one(name):
                    broke.append(name)
                taken.append(name)
            for name in broke:
                self._break_and_redo(name)
        except BaseException:
            self._unlock(taken)
            raise

    def _lock_one(self, name: str) -> bool:
        """Take `name`'s lock; a lock whose holder is provably dead is broken (see backend/refdb/ref_locks), once,
        with a line in the operation log; any other lock taken is E002. True if a dead lock was broken."""
        lock = self._path(name + ".lock")
        try:
            self._take(name, lock)
            return False
        except FileExistsError:
            info = read_lock(lock)
            if not info.breakable or not break_dead(self.root, info):
                raise lock_conflict(name, info) from None
            self._note_broken(name, info.describe())
        try:
            self._take(name, lock)
        except FileExistsError:
            raise lock_conflict(name, read_lock(lock)) from None
        return True

    def _take(self, name: str, lock: Path) -> None:
        try:
            self._create_lock(lock)
        except (NotADirectoryError, IsADirectoryError):
            raise Conflict(f"cannot lock ref {name}: a ref is in the way of its path", ref=name) from None

    def _note_broken(self, name: str, what: str) -> None:
        """One line in the operation log (`logs/OPS`, verb `break-lock`) for a dead holder's lock broken
        by this writer; it moves no ref, so `reel op log` and `reel undo` pass over it."""
        line = OpLine(new_id(), int(time.time() * 1000), "break-lock", "", f"break-lock lock:{name} broke {what}")
        with suppress(OSError):
            (self.root / "logs").mkdir(exist_ok=True)
            fd = os.open(self.root / OPS_FILE, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            try:
                os.write(fd, encode(line))
            finally:
                os.close(fd)

    def _create_lock(self, lock: Path, attempts: int = 3) -> None:
        """Create `lock` exclusively, making its directory when it is missing (not asked for first: it is
        nearly always there); retried if a concurrent prune removed it."""
        for attempt in range(attempts):
            try:
                new_lock(lock)
                return
            except FileNotFoundError:
                if attempt == attempts - 1:
                    raise
            try:
                lock.parent.mkdir(parents=True, exist_ok=True)
            except FileExistsError:
                raise NotADirectoryError(lock.parent) from None

    def _clear_way(self, name: str) -> None:
        """Refuse (E002) a name that is a directory of another ref, or under one, written or being
        written; remove empty directories left where the ref file must go."""
        parts = name.split("/")
        ancestors = ["/".join(parts[:i]) for i in range(2, len(parts))]
        loose = [a for a in ancestors if self._path(a).is_file() or self._path(a + ".lock").exists()]
        path = self._path(name)
        if path.is_dir():
            for dirpath, _, files in os.walk(path):
                loose += [os.path.join(dirpath, f) for f in files if not f.startswith(".tmp-")]
        if loose:
            raise Conflict(f"cannot lock ref {name}: {loose[0]} is in the way", ref=name)
        if path.is_dir():
            for dirpath, _, _ in sorted(os.walk(path), key=lambda t: -len(t[0])):
                with suppress(OSError):
                    os.rmdir(dirpath)

    def _unlock(self, names: list[str]) -> None:
        for name in names:
            lock = self._path(name + ".lock")
            lock.unlink(missing_ok=True)
            if not self._path(name).exists():
                self._prune_dirs(lock.parent)
        if self.fsync:
            self._checkpoint()

    def _apply_as(
        self, updates: list[RefUpdate], message: str, principal: str, held: set[str], durable: bool, moves: Moves
    ) -> None:
        self._apply(
            updates,
            message,
            principal,
            held,
            durable=durable,
            log=lambda: self._log(message, principal, moves, durable),
        )

    def _apply(
        self,
        updates: list[RefUpdate],
        message: str,
        principal: str,
        held: set[str],
        durable: bool = True,
        log: Callable[[], bool] | None = None,
    ) -> None:
        """Write every new value into a temporary file and its reflog line, log the moves (`log`), then
        rename the files over the refs and delete the deleted ones. A move durable in the operation log
        needs no fsync here: the log's line is its durability point, redone by `recover` if lost."""
        now = int(time.time() * 1000)
        deletes = [u for u in updates if u.new is None]
        staged: list[tuple[Path, Path]] = []
        logs: list[Path] = []
        try:
            for u in updates:
                if u.new is None:
                    continue
                # The new value goes into a temporary file renamed over the ref while the lock is held, so
                # the lock keeps naming its holder to the end (a killed writer's lock is provably stale).
                path = self._path(u.name)
                old = self._read(u.name)
                tmp = temp_name(path)
                write_new(tmp, format_loose(u.name, u.new), fsync=False)
                staged.append((tmp, path))
                crash_point("refs:lock-written")
                if keeps_reflog(u.name) or u.create_reflog or self._log_path(u.name).exists():
                    self._append_log(u.name, reflog_line(u.name, old, u.new, now, principal, message), sync=False)
                    logs.append(self._log_path(u.name))
                crash_point("refs:logged")
            logged = log() if log is not None else False
            crash_point("refs:op-logged")
            sync = self.fsync and durable and not logged
            if sync:
                for tmp, _ in staged:
                    _fsync_path(tmp)
                for path in logs:
                    if durable_reflog(path.relative_to(self.root / "logs").as_posix()):
                        _fsync_path(path)
            for tmp, path in staged:
                os.replace(tmp, path)
                crash_point("refs:renamed")
                if sync:
                    fsync_dir(path.parent)
        finally:
            for tmp, _ in staged:
                tmp.unlink(missing_ok=True)
        for u in deletes:
            self._unlink(u.name)

    def _unlink(self, name: str) -> None:
        self._path(name).unlink(missing_ok=True)
        self._log_path(name).unlink(missing_ok=True)
        self._prune_dirs(self._path(name).parent)
        self._prune_dirs(self._log_path(name).parent)

    def _synced(self) -> int:
        """The offset in the operation log up to which every logged ref move is durable in its ref file;
        a store without the file (made before the log was the refs' durability point) starts at the
        log's end, since its refs were fsynced one by one."""
        try:
            return int((self.root / SYNCED_FILE).read_bytes() or b"0")
        except FileNotFoundError:
            pass
        except (OSError, ValueError):
            return 0
        size = _size(self.root / OPS_FILE)
        with suppress(OSError):
            atomic_write(self.root / SYNCED_FILE, b"%d" % size, fsync=self.fsync)
        return size

    def _tail_moves(self, start: int) -> tuple[int, list[Logged]]:
        """(end, moves) of the operation log's whole lines from `start` (0 if the log is shorter now:
        it was replaced): every ref move logged there as (ref, old hex, new hex), oldest first."""
        end, found = self._tail_lines(start)
        return end, [m for _, m in found]

    def _tail_lines(self, start: int) -> tuple[int, list[tuple[int, Logged]]]:
        """`_tail_moves` with the offset of the line each move is on. Read as plain JSON, since every
        store open reads it; a log that cannot be read has nothing to redo."""
        try:
            with open(self.root / OPS_FILE, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                if size < start:
                    start = 0
                f.seek(start)
                data = f.read(size - start)
        except OSError:
            return start, []
        end = data.rfind(b"\n") + 1
        out: list[tuple[int, Logged]] = []
        at = start
        for raw in data[:end].split(b"\n")[:-1]:
            if b'"refs"' in raw:
                with suppress(ValueError, TypeError, KeyError, AttributeError):
                    out.extend(
                        (at, (r, o, n))
                        for r, o, n in json.loads(raw)["refs"]
                        if isinstance(r, str) and isinstance(o, str | None) and isinstance(n, str | None)
                    )
            at += len(raw) + 1
        return start + end, out

    def recover(self) -> list[str]:
        """Redo the ref moves the operation log holds but the ref files lack: a writer killed between its
        log line and its renames, or a power cut that took ref writes made without fsyncs. Only the
        lines past the last checkpoint are read; a ref locked by a live writer is that writer's to
        finish. The names of the refs redone."""
        if not self.fsync:
            return []
        _, moves = self._tail_moves(self._synced())
        last = {m[0]: m for m in moves}
        redone = [name for name, m in sorted(last.items()) if self._redo_one(m)]
        for name in sorted({m[0] for m in moves if durable_reflog(m[0])}):
            with suppress(OSError, BadInput):
                self._mend_reflog(name, [m for m in moves if m[0] == name and m[2] is not None])
        return redone

    def _mend_reflog(self, name: str, moves: list[Logged]) -> None:
        """Append the lines of a trunk's reflog that a power cut took (the log holds their moves): the
        reflog marks the records this store must drain."""
        path = self._log_path(name)
        try:
            with open(path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                f.seek(max(0, size - (64 << 10)))
                tail = f.read()
        except FileNotFoundError:
            tail = b""
        lost = [_move(m) for m in moves if m[2] is not None and m[2].encode() not in tail]
        if lost and self._read(name) is not None:
            now = int(time.time() * 1000)
            lines = "".join(reflog_line(name, m.old, m.new, now, "", "recover: from the operation log") for m in lost)
            self._append_log(name, lines, sync=True)

    def _redo_one(self, logged: Logged) -> bool:
        try:
            move = _move(logged)
        except BadInput:
            return False
        with suppress(StorageError, NotFound):
            if self._read(move.ref) == move.new:
                return False
        lock = self._path(move.ref + ".lock")
        if lock.exists() and not read_lock(lock).breakable:
            return False
        try:
            self._lock_one(move.ref)
        except (Conflict, OSError):
            return False
        try:
            return self._roll_forward(move)
        except OSError:
            return False
        finally:
            lock.unlink(missing_ok=True)

    def _roll_forward(self, move: RefMove) -> bool:
        """Under `move.ref`'s lock: if the ref still holds the old side of its newest logged move (or a
        file a power cut left unreadable), write the new side, durably, with its reflog line."""
        try:
            current = self._read(move.ref)
        except StorageError:
            current = move.old
        if current == move.new or current != move.old:
            return False
        if move.new is None:
            self._unlink(move.ref)
            return True
        path = self._path(move.ref)
        if keeps_reflog(move.ref) or self._log_path(move.ref).exists():
            self._append_log(
                move.ref,
                reflog_line(
                    move.ref, move.old, move.new, int(time.time() * 1000), "", "recover: redo from the operation log"
                ),
                sync=True,
            )
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, format_loose(move.ref, move.new), fsync=True)
        return True

    def _break_and_redo(self, name: str) -> None:
        """A dead holder's lock on `name` was just broken and this writer holds the lock now: redo that
        holder's move if it logged one and died before its rename, so no later write builds on a ref
        the log says moved elsewhere."""
        _, moves = self._tail_moves(self._synced())
        mine = [m for m in moves if m[0] == name]
        if mine:
            with suppress(BadInput):
                self._roll_forward(_move(mine[-1]))

    def _checkpoint(self) -> None:
        """Past `CHECKPOINT_BYTES` of log since the last checkpoint, fsync every ref (and reflog) the lines
        since then name and move the checkpoint past them: to the log's end, or to the newest line of a
        ref whose writer may be between that line and its rename (`_in_flight`)."""
        synced = self._synced_hint
        size = _size(self.root / OPS_FILE)
        if size - synced < CHECKPOINT_BYTES:
            return
        synced = self._synced_hint = self._synced()
        if size - synced < CHECKPOINT_BYTES:
            return
        end, lines = self._tail_lines(synced)
        newest = {m[0]: (at, m[2]) for at, m in lines}
        end = min([at for ref, (at, new) in newest.items() if self._in_flight(ref, new)], default=end)
        names = sorted({m[0] for at, m in lines if at < end})
        dirs = set()
        for name in names:
            for path in (self._path(name), self._log_path(name)):
                with suppress(FileNotFoundError, NotADirectoryError, IsADirectoryError):
                    _fsync_path(path)
                dirs.add(path.parent)
        for d in sorted(dirs):
            with suppress(FileNotFoundError, NotADirectoryError):
                fsync_dir(d)
        if end > synced:
            atomic_write(self.root / SYNCED_FILE, b"%d" % end, fsync=True)
        self._synced_hint = end

    def _in_flight(self, name: str, new: str | None) -> bool:
        """Whether `name` is locked and does not hold `new`, the new side of its newest logged move: its
        writer may be between that line and its rename."""
        if not self._path(name + ".lock").exists():
            return False
        try:
            current = self._read(name)
        except StorageError:
            return True
        return (None if current is None else current.hex()) != new

    def _prune_dirs(self, d: Path) -> None:
        """Remove empty directories up from `d`, keeping the namespaces themselves (refs/heads, …)."""
        tops = (self.root / "refs", self.root / "logs" / "refs")
        while any(top in d.parents and d.parent != top for top in tops):
            try:
                d.rmdir()
            except OSError:
                return
            d = d.parent

    def stale_locks(self) -> Locks:
        """Every stale lock file of this store, by path."""
        out = []
        paths: list[Path] = []
        for dirpath, _, files in os.walk(self.root / "refs"):
            paths += [Path(dirpath) / f for f in files if f.endswith(".lock")]
        for path in sorted(paths):
            if path.exists():
                info = read_lock(path)
                if info.stale:
                    out.append(info)
        return out

    def clear_stale_locks(self, force: bool = False) -> Locks:
        """Remove the locks whose holder is provably dead (with `force`, every stale one) and the
        temporary ref files dead writers left; returns the locks removed."""
        removed = []
        for info in self.stale_locks():
            if info.dead or force:
                again = read_lock(info.path)
                if again.pid == info.pid and (again.dead or (force and again.stale)):
                    info.path.unlink(missing_ok=True)
                    removed.append(info)
        for dirpath, _, files in os.walk(self.root / "refs"):
            for f in files:
                parts = f.split("-")
                if f.startswith(".tmp-") and len(parts) >= 3 and parts[-2].isdigit():
                    if not pid_alive(int(parts[-2])):
                        (Path(dirpath) / f).unlink(missing_ok=True)
        return removed

    def _append_log(self, name: str, line: str, *, sync: bool) -> None:
        path = self._log_path(name)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        except FileNotFoundError:  # its directory is made on first use, not asked for on every append
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, line.encode("utf-8"))
            if sync and self.fsync and durable_reflog(name):
                os.fsync(fd)
        finally:
            os.close(fd)

    def names(self) -> Iterator[str]:
        return self.loose_names("refs/")

    def _names_under(self, prefix: str) -> Iterator[str]:
        """Only the directory `prefix` names is walked (a drain lists `refs/heads/` and `refs/drains/` per
        effect, which a walk of every view's ref made cost more than the send)."""
        return self.loose_names(prefix[: prefix.rfind("/") + 1] or "refs/")

    def loose_names(self, top: str) -> Iterator[str]:
        """The refs under directory `top`."""
        for dirpath, _, files in os.walk(self.root / top):
            for f in files:
                name = os.path.relpath(os.path.join(dirpath, f), self.root).replace(os.sep, "/")
                if is_listable(name):
                    yield name

    def reflog(self, name: str) -> list[ReflogEntry]:
        try:
            data = self._log_path(check_ref_name(name)).read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            return []
        except OSError as exc:
            raise StorageError(f"cannot read the reflog of {name}: {exc}", ref=name) from None
        return parse_reflog(name, data)


Logged = tuple[str, str | None, str | None]
"""A ref move as the operation log holds it: (ref, old id hex, new id hex), None for none."""


def _move(logged: Logged) -> RefMove:
    """The move, its ids checked (E014 for a line whose ids are not full ids)."""
    ref, old, new = logged
    check_ref_name(ref)
    return RefMove(ref, None if old is None else Hash.from_hex(old), None if new is None else Hash.from_hex(new))


def _fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _size(path: Path) -> int:
    try:
        return os.stat(path).st_size
    except FileNotFoundError:
        return 0


def new_lock(lock: Path) -> None:
    """Create lock file `lock` holding its holder's line, atomically (a hard link of a written temporary
    file): a writer killed at any point leaves no lock, or one that names it, never an empty one that no
    one could prove dead. FileExistsError if the lock is taken."""
    tmp = temp_name(lock)
    write_new(tmp, holder_line(), fsync=False)
    try:
        os.link(tmp, lock)
    finally:
        tmp.unlink(missing_ok=True)
