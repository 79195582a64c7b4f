"""Named remotes: `[remote "NAME"] url = …` in the store's config, as git keeps them."""

from __future__ import annotations

import re

from reelstore.errors import BadInput, NotFound
from reelstore.storage.repo import Repo
from reelstore.sync.state import SyncState

DEFAULT_REMOTE = "origin"
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]{0,63}")


def check_remote_name(name: str) -> str:
    """A remote name becomes a ref component (`refs/remotes/NAME/…`), so it is kept plain."""
    if not _NAME.fullmatch(name):
        raise BadInput(f"invalid remote name {name!r}: use letters, digits, '_' and '-' (at most 64)")
    return name


def list_remotes(repo: Repo) -> list[tuple[str, str]]:
    """(name, url) of every configured remote, in config order."""
    out = []
    for name in repo.config.subsections("remote"):
        url = repo.config.get(f"remote.{name}.url")
        if url:
            out.append((name, url))
    return out


def remote_url(repo: Repo, name: str) -> str:
    """The URL of a configured remote (E001 if there is none by that name)."""
    url = repo.config.get(f"remote.{check_remote_name(name)}.url")
    if not url:
        raise NotFound(f"no remote named {name!r}; add one with `reel remote add {name} URL`")
    return url


def add_remote(repo: Repo, name: str, url: str) -> None:
    """Record a remote (E014 if the name is taken or the URL empty)."""
    check_remote_name(name)
    if not url.strip():
        raise BadInput("a remote needs a URL")
    if repo.config.get(f"remote.{name}.url"):
        raise BadInput(f"remote {name!r} already exists")
    repo.config.set(f"remote.{name}.url", url)


def remove_remote(repo: Repo, name: str) -> int:
    """Forget a remote: its config, its remote-tracking refs and what we knew of it. Returns refs deleted."""
    remote_url(repo, name)
    doomed = [ref for ref, _ in repo.refs.list(f"refs/remotes/{name}/")]
    for ref in doomed:
        repo.refs.delete(ref, message=f"remote remove {name}")
    state = SyncState(repo)
    try:
        with state:
            state.forget(name)
    finally:
        state.close()
    repo.config.remove_section("remote", name)
    return len(doomed)
