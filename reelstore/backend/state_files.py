"""A store's small state files (`epoch`, `HOLD`, `logs/OPS`, `gc.lock`, hooks), on disk or in memory.

One interface so the layers above never ask whether a store lives on disk: the epoch, the hold, the
verb log and the gc lock read and write through it, and an in-memory store keeps the same files in a
dict. Names are relative to the `.reel` directory.
"""

from __future__ import annotations

import os
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

from reelstore.backend.fileio import append_durably, atomic_write, flock_within, write_new
from reelstore.errors import BadInput, Conflict, StorageError


class StateFiles(ABC):
    """The interface: whole-file reads and atomic replaces, appends, exclusive creates and locks."""

    root: Path | None
    """The `.reel` directory, or None for a store that lives in this process only."""
    on_disk: bool
    """True if the store's files are on disk, where what an effect would touch can be checked against them."""

    @property
    @abstractmethod
    def work_dir(self) -> Path:
        """The directory that holds the store: where effects write by default (for a store in memory,
        the current directory)."""

    @abstractmethod
    def encloses(self, path: Path) -> bool:
        """True if `path` is the store's directory or lies under it, links resolved."""

    @abstractmethod
    def dir_ids(self) -> set[tuple[int, int]]:
        """(device, inode) of the store's directory, to recognise it under any other name."""

    @abstractmethod
    def read(self, name: str) -> bytes | None:
        """The file's bytes, or None if there is no such file (E007 if it cannot be read)."""

    @abstractmethod
    def tail(self, name: str, offset: int) -> bytes | None:
        """The bytes from `offset` on (b"" if none yet); None if the file is now shorter than `offset`
        (it was replaced), so the caller must read it again from the start."""

    @abstractmethod
    def write(self, name: str, data: bytes) -> None:
        """Replace the file atomically: a reader sees the old bytes or the new, whole."""

    @abstractmethod
    def append(self, name: str, data: bytes, *, durable: bool = True) -> None:
        """Append `data` in one write (durably when the store fsyncs, unless `durable` is False: a line
        that rides on a durability point its caller reached first)."""

    @abstractmethod
    def create(self, name: str, data: bytes) -> bool:
        """Create the file with `data` unless it exists; True if this call created it."""

    @abstractmethod
    def remove(self, name: str) -> None:
        """Delete the file if it is there."""

    @abstractmethod
    def lock(self, name: str, wait_s: float) -> AbstractContextManager[None]:
        """Hold the exclusive lock `name` for a `with` block (E002 after `wait_s`). A process killed while
        holding it releases it."""

    @abstractmethod
    def executable(self, name: str) -> Path | None:
        """The file as a program to run (a hook), if it exists and may be executed."""

    @abstractmethod
    def directory(self, name: str, purpose: str) -> Path:
        """The subdirectory `name`, created if missing, for state kept in files of its own (sync's
        database); E014 for a store that has no disk, naming `purpose`."""

    def where(self, name: str) -> str:
        """How to name the file in a message."""
        return str(self.root / name) if self.root is not None else f"(in-memory) {name}"


class DiskFiles(StateFiles):
    on_disk = True

    def __init__(self, root: Path, *, fsync: bool = True) -> None:
        self.root = root
        self._dir = root
        self.fsync = fsync

    @property
    def work_dir(self) -> Path:
        return self._dir.parent

    def encloses(self, path: Path) -> bool:
        real, store = Path(os.path.realpath(path)), Path(os.path.realpath(self._dir))
        return real == store or store in real.parents

    def dir_ids(self) -> set[tuple[int, int]]:
        try:
            st = os.stat(self._dir)
        except OSError:
            return set()
        return {(st.st_dev, st.st_ino)}

    def _path(self, name: str) -> Path:
        assert self.root is not None
        return self.root / name

    def read(self, name: str) -> bytes | None:
        try:
            return self._path(name).read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StorageError(f"cannot read {self.where(name)}: {exc}") from None

    def tail(self, name: str, offset: int) -> bytes | None:
        try:
            with open(self._path(name), "rb") as f:
                if os.fstat(f.fileno()).st_size < offset:
                    return None
                f.seek(offset)
                return f.read()
        except FileNotFoundError:
            return None if offset else b""
        except OSError as exc:
            raise StorageError(f"cannot read {self.where(name)}: {exc}") from None

    def write(self, name: str, data: bytes) -> None:
        path = self._path(name)
        try:
            atomic_write(path, data, fsync=self.fsync)
        except FileNotFoundError:  # its directory (bindings/, logs/) is made on first use
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(path, data, fsync=self.fsync)

    def append(self, name: str, data: bytes, *, durable: bool = True) -> None:
        path = self._path(name)
        try:
            self._append(path, data, durable)
        except FileNotFoundError:
            # Its directory (logs/) is made on first use, not asked for on every append. A directory
            # that is there means the error came later, perhaps after the write: not retried.
            if path.parent.is_dir():
                raise
            path.parent.mkdir(parents=True, exist_ok=True)
            self._append(path, data, durable)

    def _append(self, path: Path, data: bytes, durable: bool) -> None:
        if self.fsync and durable:  # concurrent writers share one fsync
            append_durably(path, data)
            return
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)

    def create(self, name: str, data: bytes) -> bool:
        try:
            write_new(self._path(name), data, fsync=False)
        except FileExistsError:
            return False
        return True

    def remove(self, name: str) -> None:
        self._path(name).unlink(missing_ok=True)

    @contextmanager
    def lock(self, name: str, wait_s: float) -> Iterator[None]:
        path = self._path(name)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if not flock_within(fd, wait_s):
                raise Conflict(f"the lock {path} stayed busy for {wait_s:.0f}s")
            yield
        finally:
            os.close(fd)

    def executable(self, name: str) -> Path | None:
        path = self._path(name)
        return path if path.is_file() and os.access(path, os.X_OK) else None

    def directory(self, name: str, purpose: str) -> Path:
        path = self._path(name)
        path.mkdir(exist_ok=True)
        return path


class MemoryFiles(StateFiles):
    """The same files in a dict, for a store that lives only in this process. It has no hooks."""

    on_disk = False

    def __init__(self) -> None:
        self.root = None
        self._files: dict[str, bytearray] = {}
        self._guard = threading.Lock()
        self._locks: dict[str, threading.RLock] = {}

    @property
    def work_dir(self) -> Path:
        return Path.cwd()

    def encloses(self, path: Path) -> bool:
        return False

    def dir_ids(self) -> set[tuple[int, int]]:
        return set()

    def read(self, name: str) -> bytes | None:
        data = self._files.get(name)
        return None if data is None else bytes(data)

    def tail(self, name: str, offset: int) -> bytes | None:
        data = self._files.get(name, bytearray())
        return None if len(data) < offset else bytes(data[offset:])

    def write(self, name: str, data: bytes) -> None:
        self._files[name] = bytearray(data)

    def append(self, name: str, data: bytes, *, durable: bool = True) -> None:
        with self._guard:
            self._files.setdefault(name, bytearray()).extend(data)

    def create(self, name: str, data: bytes) -> bool:
        with self._guard:
            if name in self._files:
                return False
            self._files[name] = bytearray(data)
            return True

    def remove(self, name: str) -> None:
        self._files.pop(name, None)

    @contextmanager
    def lock(self, name: str, wait_s: float) -> Iterator[None]:
        with self._guard:
            lock = self._locks.setdefault(name, threading.RLock())
        if not lock.acquire(timeout=wait_s):
            raise Conflict(f"the lock {self.where(name)} stayed busy for {wait_s:.0f}s")
        try:
            yield
        finally:
            lock.release()

    def executable(self, name: str) -> Path | None:
        return None

    def directory(self, name: str, purpose: str) -> Path:
        raise BadInput(f"{purpose} needs a store on disk")
