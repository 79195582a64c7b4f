"""dulwich's git client, for what our own send-pack does not cover: fetches, HTTP, and a local
repository when git is not installed (dulwich's in-process server)."""

from __future__ import annotations

from collections.abc import Callable
from typing import IO

from dulwich.client import GitClient, LocalGitClient, SubprocessGitClient, get_transport_and_path
from dulwich.protocol import Protocol

from reelstore.errors import Unreachable
from reelstore.sync.transport_base import on_path, text

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

    def _connect(
        self, cmd: bytes, path: bytes | str, protocol_version: int | None = None
    ) -> tuple[Protocol, Callable[[], bool], IO[bytes] | None]:
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


def open_client(url: str, ssh: str | None) -> tuple[GitClient, str]:
    """dulwich's client for `url` and the path it wants. Thin packs are refused: everything received
    must be checkable on its own. A local repository is served by git's own upload-pack and
    receive-pack when git is installed, else by dulwich in process."""
    try:
        client, path = get_transport_and_path(url, thin_packs=False, quiet=True, ssh_command=ssh)
    except (ValueError, KeyError) as exc:
        raise Unreachable(f"cannot use remote URL {url!r}: {text(exc)}") from None
    if isinstance(client, LocalGitClient) and on_path("git"):
        client = _BufferedGitClient(thin_packs=False, quiet=True)
    return client, path
