"""Reaching a remote: whatever URL dulwich speaks, with its failures mapped to reel's error codes."""

from __future__ import annotations

import codecs
import os
import re
import shlex
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import IO

from dulwich.client import GitClient, InvalidWants, LocalGitClient, SubprocessGitClient, get_transport_and_path
from dulwich.errors import GitProtocolError, HangupException, NotGitRepository
from dulwich.protocol import Protocol

from reelstore.errors import ReelError, Unreachable
from reelstore.storage.config import Config

Progress = Callable[[str], None]
"""Where sync reports progress: text in pieces. A line ends at `\n`; a counter redrawn in place ends at
`\r`; a piece may end mid-line (a remote's sideband is cut anywhere), so the sink reassembles lines."""


@dataclass
class Remote:
    """A connected remote: the dulwich client and the path it wants."""

    name: str
    url: str
    client: GitClient
    path: str


_WRITE_BUFFER = 1 << 16


class _WriteBuffer:
    """Protocol writes gathered and sent in 64 KiB pieces (dulwich writes a pack's entries to the pipe a
    few bytes at a time, which costs both ends a system call each), flushed before every read, so the
    other end never waits for bytes we hold."""

    def __init__(self, write: Callable[[bytes], object]) -> None:
        self._write = write
        self._pending: list[bytes] = []
        self._size = 0

    def write(self, data: bytes) -> int:
        self._pending.append(data)
        self._size += len(data)
        if self._size >= _WRITE_BUFFER:
            self.flush()
        return len(data)

    def flush(self) -> None:
        if self._pending:
            data = b"".join(self._pending)
            self._pending, self._size = [], 0
            self._write(data)


class _BufferedGitClient(SubprocessGitClient):
    """git's own receive-pack and upload-pack on a local repository, with our writes to them buffered."""

    def _connect(self, cmd: bytes, path: bytes | str,
                 protocol_version: int | None = None) -> tuple[Protocol, Callable[[], bool], IO[bytes] | None]:
        proto, can_read, stderr = super()._connect(cmd, path, protocol_version)
        buffer, read, close = _WriteBuffer(proto.write), proto.read, proto.close

        def read_after_flush(size: int) -> bytes:
            buffer.flush()
            return read(size)

        def close_after_flush() -> None:
            try:
                buffer.flush()
            except OSError:
                pass
            close()

        proto.write, proto.read = buffer.write, read_after_flush
        proto.close = close_after_flush  # type: ignore[method-assign]
        return proto, can_read, stderr


def ssh_command(config: Config | None = None) -> str | None:
    """The ssh program to reach an ssh:// remote, as git chooses it: `GIT_SSH_COMMAND` (a shell-style
    command line), else `GIT_SSH` (a program path, no arguments), else `core.sshCommand`, else None
    (dulwich's default `ssh`)."""
    command = os.environ.get("GIT_SSH_COMMAND")
    if command:
        return command
    program = os.environ.get("GIT_SSH")
    if program:
        return shlex.quote(program)
    return (config.get("core.sshcommand") if config is not None else None) or None


def connect(name: str, url: str, config: Config | None = None) -> Remote:
    """A client for `url` (a path, file://, git://, ssh://, http(s)://). Thin packs are refused:
    everything received must be checkable on its own. A local repository is served by git's own
    upload-pack and receive-pack when git is installed (the same checks and ref locking as a git
    server, and much faster than dulwich's in-process server), else by dulwich in process. ssh
    remotes honour `GIT_SSH_COMMAND`, `GIT_SSH` and `core.sshCommand` (see `ssh_command`)."""
    try:
        client, path = get_transport_and_path(url, thin_packs=False, quiet=True, ssh_command=ssh_command(config))
    except (ValueError, KeyError) as exc:
        raise Unreachable(f"cannot use remote URL {url!r}: {text(exc)}") from None
    if isinstance(client, LocalGitClient) and shutil.which("git"):
        client = _BufferedGitClient(thin_packs=False, quiet=True)
    return Remote(name, url, client, path)


def text(value: object) -> str:
    """A remote's words for a person: bytes decoded (never a Python `b'…'` repr), whitespace trimmed."""
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "replace").strip()
    if isinstance(value, BaseException):
        parts = [text(a) for a in value.args] or [type(value).__name__]
        return "; ".join(p for p in parts if p) or type(value).__name__
    return str(value).strip()


@contextmanager
def talking_to(remote: Remote) -> Iterator[None]:
    """Map transport failures to E010 (our own ReelErrors, such as a lost CAS, pass through). "cannot
    talk to" is said only when nothing answered; a remote that answered with a refusal is quoted."""
    try:
        yield
    except ReelError:
        raise
    except NotGitRepository:
        raise Unreachable(f"{remote.url} is not a git repository") from None
    except HangupException as exc:
        said = text(exc) if exc.stderr_lines else ""
        if said:
            raise Unreachable(f"remote {remote.name} ({remote.url}) hung up: {said}") from None
        raise Unreachable(f"cannot talk to remote {remote.name} ({remote.url}): it hung up without "
                          "answering") from None
    except (GitProtocolError, InvalidWants) as exc:
        silent = _unanswered(exc)
        if silent is not None:
            raise Unreachable(f"cannot talk to remote {remote.name} ({remote.url}): "
                              f"{silent.strerror or text(silent)}") from None
        raise Unreachable(f"remote {remote.name} ({remote.url}) refused: {text(exc)}") from None
    except OSError as exc:
        raise Unreachable(f"cannot talk to remote {remote.name} ({remote.url}): "
                          f"{exc.strerror or text(exc)}") from None


def _unanswered(exc: BaseException) -> OSError | None:
    """The socket error under a protocol error (an HTTP client wraps a refused connection), if any:
    then nothing answered, and the failure is ours to describe, not the remote's."""
    seen = 0
    cause = exc.__cause__ or exc.__context__
    while cause is not None and seen < 16:
        if isinstance(cause, OSError):
            return cause
        cause = cause.__cause__ or cause.__context__
        seen += 1
    return None
def remote_progress(progress: Progress | None) -> Callable[[bytes], None] | None:
    """Forward the remote's own progress text (its `\r`-terminated counters included), if anyone listens,
    each of its lines marked `remote: ` as git marks them. UTF-8 cut between two chunks is decoded whole."""
    if progress is None:
        return None
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    at_start = True

    def forward(data: bytes) -> None:
        nonlocal at_start
        out = []
        for part in re.split(r"([\r\n])", decoder.decode(data)):
            if part in ("\r", "\n"):
                at_start = True
            elif part:
                out.append("remote: " + part if at_start else part)
                at_start = False
                continue
            out.append(part)
        if out:
            progress("".join(out))

    return forward


class Counter:
    """A local counter for a Progress sink, git's way: `STAGE: N` (or `STAGE:  45% (N/TOTAL)`) redrawn in
    place at most every REDRAW_S, then `STAGE: …, done.` as a line."""

    REDRAW_S = 0.05

    def __init__(self, progress: Progress | None, stage: str, total: int | None = None,
                 unit: Callable[[int], str] = str) -> None:
        self.progress, self.stage, self.total, self.unit = progress, stage, total, unit
        self.n, self._last = 0, 0.0

    def add(self, n: int = 1) -> None:
        self.n += n
        if self.progress is not None and time.monotonic() - self._last >= self.REDRAW_S:
            self._last = time.monotonic()
            self.progress(self._text() + "\r")

    def done(self) -> None:
        if self.progress is not None:
            self.progress(self._text() + ", done.\n")

    def _text(self) -> str:
        if self.total:
            return f"{self.stage}: {min(100, self.n * 100 // self.total):3d}% ({self.n}/{self.total})"
        return f"{self.stage}: {self.unit(self.n)}"


def size(n: int) -> str:
    """Bytes for a person: `512 bytes`, `3.40 KiB`, `12.00 MiB`, as git's progress shows them."""
    if n < 1024:
        return f"{n} bytes"
    value, unit = n / 1024, "KiB"
    for bigger in ("MiB", "GiB"):
        if value < 1024:
            break
        value, unit = value / 1024, bigger
    return f"{value:.2f} {unit}"
