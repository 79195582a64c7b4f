"""The `fs` adapter: Class C file writes and deletes under one declared root directory.

Operations are JSON maps: `{"action": "write", "path": "out/a.txt", "content": "text"}` (optional
`"mode": "0644"`) and `{"action": "delete", "path": "out/a.txt"}`. The root is config
`adapter.fs.root` (relative to the directory holding `.reel`; default that directory itself).

Every path is walked one component at a time from a descriptor of the root, each directory opened
with O_NOFOLLOW | O_DIRECTORY relative to its parent's descriptor, so no symbolic link is ever
followed and a directory swapped for a link mid-walk makes the open fail instead of leading outside.
The file is written to a temporary name in the final directory (by descriptor) and renamed there.
The store itself is out of reach: a `.reel` component, a directory that is the store's, or a root
inside the store is refused. So is a path that cannot be written (a component longer than the
file system's NAME_MAX, a component that is a file or a link, a target that is a directory). All of
it is checked at admission (E014), so a doomed effect is never queued, and again at send, where a
failed check writes nothing and is reported `failed`.

Delivery is `keyed`: both operations are idempotent on the target's state (writing the same bytes
again, deleting a missing file), so resending after a crash converges to the state the effect names,
and reconcile can tell by looking whether a write already landed.
"""

from __future__ import annotations

import os
import secrets
import stat
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import Any

import blake3

from reelstore.adapters.base import Adapter, Admission, Result, known_keys, register
from reelstore.backend.fileio import write_all
from reelstore.errors import BadInput
from reelstore.objects import Effect

ACTIONS = ("write", "delete")
OP_KEYS = ("action", "path", "content", "mode")
"""Every key an fs op may have."""
MAX_CONTENT = 16 * 1024 * 1024
STORE_NAME = ".reel"
NAME_MAX = 255
"""Used when the file system will not say (`fpathconf`)."""

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _relative(path: Any) -> str:
    if not isinstance(path, str) or not path or "\0" in path or len(path) > 4096:
        raise BadInput("fs op needs a non-empty string 'path'")
    pure = PurePosixPath(path)
    if pure.is_absolute() or path.startswith("\\") or (len(path) > 1 and path[1] == ":"):
        raise BadInput(f"fs path {path!r} is absolute; paths are relative to the adapter's root")
    if any(part == ".." for part in pure.parts):
        raise BadInput(f"fs path {path!r} contains '..'")
    parts = [p for p in pure.parts if p != "."]
    if not parts:
        raise BadInput(f"fs path {path!r} names the root itself")
    if any(p.casefold() == STORE_NAME for p in parts):
        raise BadInput(f"fs path {path!r} reaches into a store directory ({STORE_NAME}); effects cannot write there")
    for part in parts:
        try:
            part.encode("utf-8")
        except UnicodeEncodeError:
            raise BadInput(f"fs path {path!r} is not valid UTF-8 text") from None
    return "/".join(parts)


def check_op(op: Mapping[str, Any]) -> None:
    """E014 naming the first unknown key of an fs op."""
    known_keys(op, OP_KEYS, "fs")


class _Unwritable(Exception):
    """A path the walk refuses; the message names why."""


@register
class FsAdapter(Adapter):
    name = "fs"

    def root(self) -> Path:
        configured = self.repo.config.get("adapter.fs.root")
        top = self.repo.files.work_dir
        return (top / configured) if configured else top

    def classify(self, op: Mapping[str, Any]) -> Admission:
        check_op(op)
        action = op.get("action")
        if action not in ACTIONS:
            raise BadInput(f"fs op 'action' must be one of {', '.join(ACTIONS)}, not {action!r}")
        path = _relative(op.get("path"))
        if action == "write":
            content = op.get("content")
            if not isinstance(content, str) or len(content.encode("utf-8")) > MAX_CONTENT:
                raise BadInput(f"fs write needs a string 'content' of at most {MAX_CONTENT} bytes")
            _mode(op)
        elif "content" in op or "mode" in op:
            raise BadInput("fs delete takes only 'path'")
        if self.repo.files.on_disk:
            try:
                with self._parent(path, create=False):
                    pass
            except _Unwritable as exc:
                raise BadInput(str(exc)) from None
        return Admission(resource=f"fs:{path}", effect_class="C", delivery="keyed")

    @contextmanager
    def _parent(self, path: str, *, create: bool) -> Iterator[tuple[int | None, str]]:
        """(descriptor of the directory that holds `path`'s last component, that component).

        Walks from the root without following links; with `create`, makes missing directories. Without
        it, a missing directory yields None: the rest of the path is checked by name only, since nothing
        can be in the way there. Raises _Unwritable for a path that could never be written."""
        parts = _relative(path).split("/")
        root = self.root()
        store = self.repo.files.dir_ids()
        if self.repo.files.encloses(root):
            raise _Unwritable(f"the fs root {root} lies inside the store {self.repo.path}")
        held = _open_root(root, create)
        try:
            if held is not None:
                self._refuse_store(held, root, store)
            limit = NAME_MAX if held is None else _name_max(held)
            for part in parts:
                if len(part.encode("utf-8")) > limit:
                    raise _Unwritable(
                        f"fs path {path!r}: component {part[:40]!r}… is longer than the "
                        f"file system's limit of {limit} bytes"
                    )
            for i, part in enumerate(parts[:-1]):
                if held is None:
                    break
                nxt = _open_dir(held, part, create, f"{path!r}: {'/'.join(parts[: i + 1])}")
                os.close(held)
                held = nxt
                if held is not None:
                    self._refuse_store(held, root / "/".join(parts[: i + 1]), store)
            last = parts[-1]
            if held is not None:
                try:
                    st = os.stat(last, dir_fd=held, follow_symlinks=False)
                except FileNotFoundError:
                    st = None
                if st is not None and stat.S_ISDIR(st.st_mode):
                    raise _Unwritable(f"fs path {path!r} is an existing directory; only files are written")
            yield held, last
        finally:
            if held is not None:
                os.close(held)

    @staticmethod
    def _refuse_store(fd: int, where: Path, store: set[tuple[int, int]]) -> None:
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) in store:
            raise _Unwritable(f"{where} is the store's own directory; effects cannot write there")

    def fire(self, effect: Effect, token: Any, op_id: str) -> Result:
        token.consume(effect.id)
        op = effect.op
        path = str(op.get("path"))
        shown = str(self.root() / path)
        try:
            if op.get("action") == "delete":
                with self._parent(path, create=False) as (fd, name):
                    existed = False
                    if fd is not None:
                        try:
                            os.unlink(name, dir_fd=fd)
                            existed = True
                        except FileNotFoundError:
                            pass
                return Result("succeeded", {"path": shown, "deleted": existed})
            data = str(op.get("content", "")).encode("utf-8")
            fsync = self.repo.config.get_bool("core.fsync", True)
            with self._parent(path, create=True) as (fd, name):
                assert fd is not None, "created parents always yield a descriptor"
                _write_at(fd, name, data, _mode(op), fsync)
        except (_Unwritable, BadInput) as exc:
            return Result("failed", note=f"nothing written: {exc}")
        except OSError as exc:
            return Result("failed", note=f"nothing written: {exc.strerror or exc}")
        return Result("succeeded", {"path": shown, "bytes": len(data), "blake3": blake3.blake3(data).hexdigest()})

    def reconcile(self, effect: Effect, op_id: str) -> str:
        op = effect.op
        try:
            with self._parent(str(op.get("path")), create=False) as (fd, name):
                if fd is None:
                    return "absent" if op.get("action") == "write" else "succeeded"
                if op.get("action") == "delete":
                    try:
                        os.stat(name, dir_fd=fd, follow_symlinks=False)
                    except FileNotFoundError:
                        return "succeeded"
                    return "absent"
                return "succeeded" if _read_at(fd, name) == str(op.get("content", "")).encode("utf-8") else "absent"
        except (_Unwritable, BadInput, OSError):
            return "absent"


def _open_root(root: Path, create: bool) -> int | None:
    """A descriptor of the root (made first with `create`; None if it is missing). The root's own
    path is the operator's configuration, so links in it are followed."""
    try:
        if create:
            root.mkdir(parents=True, exist_ok=True)
        return os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        if create:
            raise _Unwritable(f"the fs root {root} vanished while it was created") from None
        return None
    except OSError as exc:
        raise _Unwritable(f"the fs root {root} cannot be opened: {exc.strerror}") from None


def _name_max(fd: int) -> int:
    try:
        return int(os.fpathconf(fd, "PC_NAME_MAX"))
    except (OSError, ValueError):
        return NAME_MAX


def _open_dir(parent: int, name: str, create: bool, where: str) -> int | None:
    """The directory `name` under `parent`, opened without following a link (None if missing and not
    `create`). A link, or anything that is not a directory, is refused."""
    for _ in range(3):
        try:
            return os.open(name, _DIR_FLAGS, dir_fd=parent)
        except FileNotFoundError:
            if not create:
                return None
            try:
                os.mkdir(name, 0o777, dir_fd=parent)
            except FileExistsError:
                continue
        except (NotADirectoryError, OSError) as exc:
            try:
                st = os.stat(name, dir_fd=parent, follow_symlinks=False)
            except OSError:
                raise _Unwritable(f"fs path {where} cannot be opened: {exc.strerror}") from None
            what = "a symbolic link" if stat.S_ISLNK(st.st_mode) else "not a directory"
            raise _Unwritable(f"fs path {where} is {what}; links are never followed") from None
    raise _Unwritable(f"fs path {where} keeps changing while it is created")


def _write_at(dirfd: int, name: str, data: bytes, mode: int, fsync: bool) -> None:
    """Write `name` in the directory `dirfd` atomically: a temporary file there, then a rename there."""
    tmp = f".reel-tmp-{os.getpid()}-{secrets.token_hex(6)}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dirfd)
    try:
        try:
            write_all(fd, data, fsync=fsync)
        finally:
            os.close(fd)
        os.rename(tmp, name, src_dir_fd=dirfd, dst_dir_fd=dirfd)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=dirfd)
        except FileNotFoundError:
            pass
        raise
    if fsync:
        os.fsync(dirfd)


def _read_at(dirfd: int, name: str) -> bytes | None:
    """The bytes of regular file `name` in `dirfd` (None if missing or not a plain file), bounded by
    the largest content a write may carry."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=dirfd)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        chunks: list[bytes] = []
        total = 0
        while total <= MAX_CONTENT:
            piece = os.read(fd, 1 << 20)
            if not piece:
                return b"".join(chunks)
            chunks.append(piece)
            total += len(piece)
        return None
    finally:
        os.close(fd)


def _mode(op: Mapping[str, Any]) -> int:
    raw = op.get("mode", "0644")
    if not isinstance(raw, str) or not raw.isdigit() or len(raw) > 4 or any(c > "7" for c in raw):
        raise BadInput(f"fs 'mode' must be an octal string like '0644', not {raw!r}")
    mode = int(raw, 8)
    if mode & 0o7000:
        raise BadInput("fs 'mode' may not set setuid, setgid or sticky bits")
    return mode
