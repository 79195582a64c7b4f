"""Reaching a remote: whatever URL dulwich speaks, with its failures mapped to reel's error codes."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from dulwich.client import GitClient, InvalidWants, LocalGitClient, SubprocessGitClient, get_transport_and_path
from dulwich.errors import GitProtocolError, HangupException, NotGitRepository

from reelstore.errors import ReelError, Unreachable

Progress = Callable[[str], None]


@dataclass
class Remote:
    """A connected remote: the dulwich client and the path it wants."""

    name: str
    url: str
    client: GitClient
    path: str


def connect(name: str, url: str) -> Remote:
    """A client for `url` (a path, file://, git://, ssh://, http(s)://). Thin packs are refused:
    everything received must be checkable on its own. A local repository is served by git's own
    upload-pack and receive-pack when git is installed (the same checks and ref locking as a git
    server, and much faster than dulwich's in-process server), else by dulwich in process."""
    try:
        client, path = get_transport_and_path(url, thin_packs=False, quiet=True)
    except (ValueError, KeyError) as exc:
        raise Unreachable(f"cannot use remote URL {url!r}: {exc}") from None
    if isinstance(client, LocalGitClient) and shutil.which("git"):
        client = SubprocessGitClient(thin_packs=False, quiet=True)
    return Remote(name, url, client, path)


@contextmanager
def talking_to(remote: Remote) -> Iterator[None]:
    """Map transport failures to E010 (our own ReelErrors, such as a lost CAS, pass through)."""
    try:
        yield
    except ReelError:
        raise
    except NotGitRepository:
        raise Unreachable(f"{remote.url} is not a git repository") from None
    except (HangupException, GitProtocolError, InvalidWants, OSError) as exc:
        raise Unreachable(f"cannot talk to remote {remote.name} ({remote.url}): {exc}") from None


def remote_progress(progress: Progress | None) -> Callable[[bytes], None] | None:
    """Forward the remote's own progress text (its `\r`-terminated counters included), if anyone listens."""
    if progress is None:
        return None
    return lambda data: progress(data.decode("utf-8", "replace"))
