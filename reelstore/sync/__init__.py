"""Sync: any git remote as the shared store between machines.

Reel objects travel as git blobs in fan-out trees under sync commits; reel refs live on the remote
as `refs/reel/…`; a push moves each remote ref by compare-and-swap; a fetch stores nothing it has
not re-hashed and decoded.
"""

from __future__ import annotations

import importlib
import sys
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from reelstore.sync.abort import abort
    from reelstore.sync.fetch import FetchResult, TrunkMove, clone, fetch
    from reelstore.sync.push import PushResult, RefPush, RemoteFence, advance_remote_trunk, delete, push, remote_fence
    from reelstore.sync.remote import DEFAULT_REMOTE, add_remote, list_remotes, remote_url, remove_remote, rename_remote

_HOMES = {
    "abort": "abort",
    "FetchResult": "fetch",
    "TrunkMove": "fetch",
    "clone": "fetch",
    "fetch": "fetch",
    "PushResult": "push",
    "RefPush": "push",
    "RemoteFence": "push",
    "advance_remote_trunk": "push",
    "delete": "push",
    "push": "push",
    "remote_fence": "push",
    "DEFAULT_REMOTE": "remote",
    "add_remote": "remote",
    "list_remotes": "remote",
    "remote_url": "remote",
    "remove_remote": "remote",
    "rename_remote": "remote",
}
"""Each name this package exports -> the submodule that defines it, imported on first use: `reel push`
then loads push's modules only, not fetch's (dulwich's object store) nor abort's (the kernel's verbs)."""


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


class _Package(ModuleType):
    """Three exported functions share their submodule's name (`push`, `fetch`, `abort`). Importing a
    submodule binds it on its package, which would turn `sync.push` from the function into the module;
    so a submodule is not bound under an exported name (it stays in `sys.modules`), and the name keeps
    meaning the function, as it did when this package imported everything at once."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _HOMES and isinstance(value, ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package

__all__ = [
    "DEFAULT_REMOTE",
    "FetchResult",
    "PushResult",
    "RefPush",
    "RemoteFence",
    "TrunkMove",
    "abort",
    "add_remote",
    "advance_remote_trunk",
    "clone",
    "delete",
    "fetch",
    "list_remotes",
    "push",
    "remote_fence",
    "remote_url",
    "remove_remote",
    "rename_remote",
]
