"""Atomic, durable file writes: temp file, fsync, rename, fsync of the directory.

A reader never sees a partial file: it sees the old content or the new, never a mix.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

_GROUP = struct.Struct(">QQ")
"""A group-sync record: the appended file's inode and the size its last fsync covered."""


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_all(fd: int, data: bytes, *, fsync: bool) -> None:
    """Write every byte of `data` to `fd` (os.write may write fewer), then fsync it if asked."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    if fsync:
        os.fsync(fd)


def write_new(path: Path, data: bytes, *, fsync: bool = True, mode: int = 0o644) -> None:
    """Create `path` exclusively with `data` (FileExistsError if it exists), durably."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        write_all(fd, data, fsync=fsync)
    except BaseException:
        os.close(fd)
        path.unlink(missing_ok=True)
        raise
    os.close(fd)


def temp_name(path: Path) -> Path:
    return path.with_name(f".tmp-{path.name}-{os.getpid()}-{os.urandom(4).hex()}")


def atomic_write(path: Path, data: bytes, *, fsync: bool = True, mode: int = 0o644) -> None:
    """Replace `path` with `data` atomically: a reader sees the old bytes or the new, whole."""
    tmp = temp_name(path)
    write_new(tmp, data, fsync=fsync, mode=mode)
    try:
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if fsync:
        fsync_dir(path.parent)


def append_durably(path: Path, data: bytes) -> None:
    """Append `data` to `path` with one write and make it durable, sharing the fsync with every writer
    (thread or process) that appended before it: writers queue on an flock of `PATH.group`, and the
    first to get it fsyncs the file for all of them and records the size that fsync covered there; a
    writer whose append that size already covers returns without an fsync of its own (group commit)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        write_all(fd, data, fsync=False)
        end = os.lseek(fd, 0, os.SEEK_CUR)
        group_sync(path, fd, end)
    finally:
        os.close(fd)


def group_sync(path: Path, fd: int, end: int) -> None:
    """Make `path` (open as `fd`) durable up to byte `end`: at most one fsync, shared (see `append_durably`)."""
    import fcntl  # only a durable appender needs it

    gfd = os.open(path.with_name(path.name + ".group"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(gfd, fcntl.LOCK_EX)  # held for one fsync at most; a killed holder releases it
        st = os.fstat(fd)
        raw = os.pread(gfd, _GROUP.size, 0)
        if len(raw) == _GROUP.size:
            done_ino, done = _GROUP.unpack(raw)
            # A record of another file (the log replaced, its inode reused) is larger than this one.
            if done_ino == st.st_ino and end <= done <= st.st_size:
                return
        ino, size = st.st_ino, st.st_size
        os.fsync(fd)
        os.pwrite(gfd, _GROUP.pack(ino, size), 0)
    finally:
        os.close(gfd)


def flock_within(fd: int, wait_s: float) -> bool:
    """Take an exclusive flock on `fd`, waiting at most `wait_s` seconds; False if it stayed busy (the
    caller then closes `fd`). A busy lock is waited for by a helper thread blocked in flock, so the
    waiter wakes when the lock is released rather than polling: sixteen committers polling one queue
    spent as much CPU on it as on their commits."""
    import fcntl  # only a lock taker needs it

    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        pass
    import threading

    got, state = threading.Event(), threading.Lock()
    gave_up = [False]
    mine = os.dup(fd)  # the helper's own descriptor of the same open file, closed by the helper alone

    def take() -> None:
        try:
            fcntl.flock(mine, fcntl.LOCK_EX)
            with state:
                if not gave_up[0]:
                    got.set()
                    return
            fcntl.flock(mine, fcntl.LOCK_UN)  # too late: the waiter left; let the next one in
        except OSError:
            pass
        finally:
            os.close(mine)

    threading.Thread(target=take, name="flock-wait", daemon=True).start()
    got.wait(wait_s)
    with state:
        if got.is_set():
            return True
        gave_up[0] = True
        return False


def pid_alive(pid: int) -> bool:
    """Whether process `pid` exists on this host (one owned by another user counts): how a lock or a
    registration tells a holder that died from one still at work."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
