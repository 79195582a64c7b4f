"""Named remotes: `[remote "NAME"] url = …` in the store's config, as git keeps them."""

from __future__ import annotations

import re

from reelstore.backend.repo import Repo
from reelstore.crashpoints import crash_point
from reelstore.errors import BadInput, Conflict, NotFound
from reelstore.objects.ref import trunk_ref
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


def add_remote(repo: Repo, name: str, url: str, track: list[str] | None = None) -> None:
    """Record a remote (E014 if the name is taken or the URL empty). Each trunk in `track` then
    tracks it: its commits default to `--remote NAME`."""
    check_remote_name(name)
    if not url.strip():
        raise BadInput("a remote needs a URL")
    if repo.config.get(f"remote.{name}.url"):
        raise BadInput(f"remote {name!r} already exists")
    for trunk in track or []:
        if repo.refs.get(trunk_ref(trunk)) is None:
            raise NotFound(f"no trunk {trunk!r} to track {name!r}")
    repo.config.set(f"remote.{name}.url", url)
    if track:
        from reelstore.kernel import binding  # bindings are loaded only where a remote changes them

        for trunk in track:
            binding.track(repo, trunk, name)


def rename_remote(repo: Repo, old: str, new: str) -> int:
    """Rename a remote as git does: its config section, the trunks that track it, its remote-tracking
    refs `refs/remotes/OLD/*` (moved in one ref transaction), what this store knew of it and the views
    bound to it. Returns the refs moved. E001 if `old` is unknown, E014 if `new` is taken or invalid.

    The config is written last, in one save: until then the remote is still `old`, so a rename cut
    short by a crash is finished by running it again."""
    remote_url(repo, old)
    check_remote_name(new)
    if repo.config.get(f"remote.{new}.url") or new in repo.config.subsections("remote"):
        raise BadInput(f"remote {new!r} already exists")
    moving = repo.refs.list(f"refs/remotes/{old}/")
    if moving and repo.refs.list(f"refs/remotes/{new}/"):
        raise BadInput(
            f"refs/remotes/{new}/ already holds refs that no remote owns; delete them first (`reel update-ref -d REF`)"
        )
    message = f"remote rename {old} {new}"
    with repo.refs.transaction(message=message) as txn:
        for ref, target in moving:
            txn.delete(ref, target)
            txn.create(f"refs/remotes/{new}/{ref.removeprefix(f'refs/remotes/{old}/')}", target)
    state = SyncState(repo)
    try:
        with state:
            state.rename(old, new)
    finally:
        state.close()
    from reelstore.kernel import binding

    binding.rebind_remote(repo, old, new)
    crash_point("remote-rename:config")
    with repo.config.batch():
        for key, value in repo.config.items():
            if key.startswith("trunk.") and key.endswith(".remote") and value == old:
                repo.config.set(key, new)
        repo.config.rename_section("remote", old, new)
    return len(moving)


def remove_remote(repo: Repo, name: str, *, force: bool = False) -> int:
    """Forget a remote: its config, its remote-tracking refs and what we knew of it. Returns refs deleted.

    A live view bound to the remote has a copy there that another store can commit, so it can be
    committed or aborted only through that remote: E002 while any is live, unless `force`, which keeps
    them bound (until a remote of that name is added again, they can be neither)."""
    from reelstore.kernel import binding

    remote_url(repo, name)
    bound = binding.bound_to(repo, name)
    if bound and not force:
        from reelstore.wording import listed

        shown = listed(bound, 10)
        raise Conflict(
            f"remote {name!r} has live views bound to it ({shown}): each has a copy there that another "
            f"store can commit. Commit them with `reel commit VIEW --remote {name}` or abort them "
            f"(`reel abort VIEW` removes the remote copy) first, or remove the remote anyway with "
            f"--force: they stay bound, and can be neither committed nor aborted until a remote named "
            f"{name!r} is added again",
            remote=name,
            views=bound,
        )
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
    for key, value in repo.config.items():
        if key.startswith("trunk.") and key.endswith(".remote") and value == name:
            repo.config.unset(key)
    return len(doomed)
