"""Reaching a remote: whatever URL dulwich speaks, with its failures mapped to reel's error codes."""

from __future__ import annotations

import codecs
import os
import re
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from reelstore.backend.config import Config
from reelstore.errors import ReelError, Unreachable
from reelstore.sync.dulwich_client import open_client
from reelstore.sync.transport_base import local_repository, on_path, text

if TYPE_CHECKING:
    from dulwich.client import GitClient

Progress = Callable[[str], None]
"""Where sync reports progress: text in pieces. A line ends at `\n`; a counter redrawn in place ends at
`\r`; a piece may end mid-line (a remote's sideband is cut anywhere), so the sink reassembles lines."""


class Remote:
    """A remote to talk to: its name, URL and the path its server wants. A local repository, when git is
    installed, is pushed to and fetched from by our own client (`local`, `send_pack`); dulwich's client,
    for everything else, is made (and its module imported) on first use."""

    def __init__(
        self,
        name: str,
        url: str,
        path: str,
        *,
        local: bool = False,
        ssh: str | None = None,
        client: GitClient | None = None,
    ) -> None:
        self.name, self.url, self.path, self.local = name, url, path, local
        self._ssh = ssh
        self._client = client

    @property
    def client(self) -> GitClient:
        if self._client is None:
            self._client, self.path = open_client(self.url, self._ssh)
        return self._client


def ssh_command(config: Config | None = None) -> str | None:
    """The ssh program to reach an ssh:// remote, as git chooses it: `GIT_SSH_COMMAND` (a shell-style
    command line), else `GIT_SSH` (a program path, no arguments), else `core.sshCommand`, else None
    (dulwich's default `ssh`)."""
    command = os.environ.get("GIT_SSH_COMMAND")
    if command:
        return command
    program = os.environ.get("GIT_SSH")
    if program:
        import shlex  # only here: its import compiles a pattern, on every push otherwise

        return shlex.quote(program)
    return (config.get("core.sshcommand") if config is not None else None) or None


def connect(name: str, url: str, config: Config | None = None) -> Remote:
    """A client for `url` (a path, file://, git://, ssh://, http(s)://). Thin packs are refused:
    everything received must be checkable on its own. A local repository is served by git's own
    upload-pack and receive-pack when git is installed (the same checks and ref locking as a git
    server, and much faster than dulwich's in-process server), else by dulwich in process. ssh
    remotes honour `GIT_SSH_COMMAND`, `GIT_SSH` and `core.sshCommand` (see `ssh_command`)."""
    ssh = ssh_command(config)
    local = local_repository(url)
    if local is not None and on_path("git"):
        return Remote(name, url, local, local=True, ssh=ssh)
    client, path = open_client(url, ssh)
    return Remote(name, url, path, ssh=ssh, client=client)


@contextmanager
def talking_to(remote: Remote) -> Iterator[None]:
    """Map transport failures to E010 (our own ReelErrors, such as a lost CAS, pass through). "cannot
    talk to" is said only when nothing answered; a remote that answered with a refusal is quoted."""
    try:
        yield
    except ReelError:
        raise
    except OSError as exc:
        raise Unreachable(f"cannot talk to remote {remote.name} ({remote.url}): {exc.strerror or text(exc)}") from None
    except Exception as exc:
        if dulwich_error(exc, "NotGitRepository"):
            raise Unreachable(f"{remote.url} is not a git repository") from None
        if dulwich_error(exc, "HangupException"):
            said = text(exc) if getattr(exc, "stderr_lines", None) else ""
            if said:
                raise Unreachable(f"remote {remote.name} ({remote.url}) hung up: {said}") from None
            raise Unreachable(
                f"cannot talk to remote {remote.name} ({remote.url}): it hung up without answering"
            ) from None
        if dulwich_error(exc, "GitProtocolError") or isinstance(exc, _client_errors()):
            raise _refused(remote, exc) from None
        raise


def _refused(remote: Remote, exc: Exception) -> Unreachable:
    """A protocol failure in words: "cannot talk to" if nothing answered, else the remote's refusal."""
    silent = _unanswered(exc)
    if silent is not None:
        return Unreachable(f"cannot talk to remote {remote.name} ({remote.url}): {silent.strerror or text(silent)}")
    return Unreachable(f"remote {remote.name} ({remote.url}) refused: {text(exc)}")


def dulwich_error(exc: BaseException, name: str) -> bool:
    """Is `exc` an instance of `dulwich.errors.<name>`? Asked of the module only if it is loaded: nothing
    raises its errors without loading it first, and a push to a local repository never does."""
    errors = sys.modules.get("dulwich.errors")
    return errors is not None and isinstance(exc, getattr(errors, name))


def _client_errors() -> tuple[type[Exception], ...]:
    """dulwich.client's own exceptions, if that module is in use (it is imported only when needed)."""
    client = sys.modules.get("dulwich.client")
    return (client.InvalidWants,) if client is not None else ()


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

    def __init__(
        self, progress: Progress | None, stage: str, total: int | None = None, unit: Callable[[int], str] = str
    ) -> None:
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
