"""The ref store: names under `refs/` pointing at object ids (the name rules live in objects/ref.py).

Every change is a compare-and-swap against an expected old value, taken under a lock file as git does
it: create `NAME.lock` exclusively (it names its holder: pid, host, time), re-read the ref under the
lock, compare, write and fsync the new value into a temporary file, log it, rename that over the ref,
remove the lock. A multi-ref transaction locks every
ref (in name order) and checks every old value before it writes anything, so a failed check changes
nothing. A lock that is already there is reported (it may belong to a live writer), except one whose
holder is provably dead (a process of this host and boot that no longer runs): the next writer breaks
that one, with a line in the operation log (see storage/ref_locks). Any other stale lock (an unknown
holder, or older than the lock timeout) is reported with its remedy; `clear_stale_locks` removes them.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import suppress
from pathlib import Path

from reelstore.crashpoints import crash_point
from reelstore.errors import Conflict, NotFound, StorageError
from reelstore.objects import Hash
from reelstore.objects.ref import check_ref_name
from reelstore.storage.fileio import fsync_dir, pid_alive, temp_name, write_new
from reelstore.storage.inflight import Inflight
from reelstore.storage.op_log import FILE as OPS_FILE
from reelstore.storage.op_log import OpLine, RefMove, encode, new_id
from reelstore.storage.ref_format import (
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
from reelstore.storage.ref_locks import LOCK_TIMEOUT, LockInfo, Locks, break_dead, lock_conflict, read_lock
from reelstore.storage.ref_transaction import RefTransaction, RefUpdate, Updates
from reelstore.storage.reflog import ReflogEntry, parse_reflog

__all__ = ["ANY", "LOCK_TIMEOUT", "DiskRefStore", "LockInfo", "MemoryRefStore", "RefStore", "RefTransaction",
           "RefUpdate", "ReflogEntry", "checksum"]


class RefStore:
    """The interface: read, list, compare-and-swap, transactions, reflogs."""

    before_apply: Callable[[], None] | None = None
    """Called once every ref of a transaction is locked and checked, before anything is written: the
    store points it at its object store's `flush`, so a ref never names an object not yet durable and
    a lost race (caught while locking) makes nothing durable."""

    after_apply: Callable[[str, str, list[RefMove], bool], None] | None = None
    """Called with (message, principal, moves, durable) once a transaction's refs are written, its locks
    still held: the store points it at its operation log, the one place every ref move is logged."""

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

    def _settle(self) -> None:
        """A transaction landed: the objects this thread wrote before it are referenced now, or garbage,
        and need no more protection from a concurrent gc (see storage/inflight.py). A failed one settles
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
        for name in sorted(set(self.names())):
            if name.startswith(prefix):
                value = self._read(name)
                if value is not None:
                    out.append((name, value))
        return out

    def _apply_as(self, updates: Updates, message: str, principal: str, held: set[str],
                  durable: bool) -> None:
        """`_apply`, durably or not; a store without fsyncs has nothing to relax."""
        self._apply(updates, message, principal, held)

    def transaction(self, message: str = "", principal: str = "", create_reflog: bool = False, *,
                    durable: bool = True) -> RefTransaction:
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
        try:
            for name in names:
                self._clear_way(name)
                self._lock_one(name)
                taken.append(name)
        except BaseException:
            self._unlock(taken)
            raise

    def _lock_one(self, name: str) -> None:
        """Take `name`'s lock; a lock whose holder is provably dead is broken (see storage/ref_locks), once,
        with a line in the operation log; any other lock taken is E002."""
        lock = self._path(name + ".lock")
        for attempt in range(2):
            try:
                self._create_lock(lock)
                return
            except (NotADirectoryError, IsADirectoryError):
                raise Conflict(f"cannot lock ref {name}: a ref is in the way of its path", ref=name) from None
            except FileExistsError:
                info = read_lock(lock)
                if attempt or not info.breakable or not break_dead(self.root, info):
                    raise lock_conflict(name, info) from None
                self._note_broken(name, info.describe())

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
        """Create `lock` exclusively, making its directory; retried if a concurrent prune removed it."""
        for attempt in range(attempts):
            try:
                lock.parent.mkdir(parents=True, exist_ok=True)
            except FileExistsError:
                raise NotADirectoryError(lock.parent) from None
            try:
                new_lock(lock)
                return
            except FileNotFoundError:
                if attempt == attempts - 1:
                    raise

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

    def _apply_as(self, updates: list[RefUpdate], message: str, principal: str, held: set[str],
                  durable: bool) -> None:
        self._apply(updates, message, principal, held, durable=durable)

    def _apply(self, updates: list[RefUpdate], message: str, principal: str, held: set[str],
               durable: bool = True) -> None:
        now = int(time.time() * 1000)
        sync = self.fsync and durable
        deletes = [u for u in updates if u.new is None]
        for u in updates:
            if u.new is None:
                continue
            # The new value goes into a temporary file renamed over the ref while the lock is held, so
            # the lock keeps naming its holder to the end (a killed writer's lock is provably stale).
            path = self._path(u.name)
            old = self._read(u.name)
            tmp = temp_name(path)
            write_new(tmp, format_loose(u.name, u.new), fsync=sync)
            crash_point("refs:lock-written")
            if keeps_reflog(u.name) or u.create_reflog or self._log_path(u.name).exists():
                self._append_log(u.name, reflog_line(u.name, old, u.new, now, principal, message))
            crash_point("refs:logged")
            try:
                os.replace(tmp, path)
            except BaseException:
                tmp.unlink(missing_ok=True)
                raise
            crash_point("refs:renamed")
            if sync:
                fsync_dir(path.parent)
        for u in deletes:
            self._path(u.name).unlink(missing_ok=True)
            self._log_path(u.name).unlink(missing_ok=True)
            self._prune_dirs(self._path(u.name).parent)
            self._prune_dirs(self._log_path(u.name).parent)

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

    def _append_log(self, name: str, line: str) -> None:
        path = self._log_path(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, line.encode("utf-8"))
            if self.fsync and durable_reflog(name):
                os.fsync(fd)
        finally:
            os.close(fd)

    def names(self) -> Iterator[str]:
        for dirpath, _, files in os.walk(self.root / "refs"):
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
