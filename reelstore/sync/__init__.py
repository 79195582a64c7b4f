"""Sync: any git remote as the shared store between machines (DESIGN §7).

Reel objects travel as git blobs in fan-out trees under sync commits; reel refs live on the remote
as `refs/reel/…`; a push moves each remote ref by compare-and-swap; a fetch stores nothing it has
not re-hashed and decoded.
"""

from reelstore.sync.abort import abort
from reelstore.sync.fetch import FetchResult, TrunkMove, clone, fetch
from reelstore.sync.push import PushResult, RefPush, RemoteFence, advance_remote_trunk, delete, push, remote_fence
from reelstore.sync.remote import DEFAULT_REMOTE, add_remote, list_remotes, remote_url, remove_remote, rename_remote

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
