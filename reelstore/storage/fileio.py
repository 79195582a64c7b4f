"""Atomic, durable file writes: temp file, fsync, rename, fsync of the directory.

A reader never sees a partial file: it sees the old content or the new, never a mix.
"""

from __future__ import annotations

import os
from pathlib import Path


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
