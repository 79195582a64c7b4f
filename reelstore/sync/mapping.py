"""How reel objects and refs look inside a git repository, in both directions.

A sync commit's tree is

    refs                  `<reel id> <ref name>` lines: the reel refs this commit sets
    objects/ab/cdef…      one git blob per reel object new in this push: its canonical bytes,
                          named by its BLAKE3 id split after two hex digits

and its parents are the sync commits the pusher knew the remote held. So a remote ref
`refs/reel/heads/main` points at a commit whose ancestry holds the whole closure of the reel
target its `refs` file names, `git fsck` sees ordinary connected objects, git's negotiation sends
only the commits (and so only the objects) the other side lacks, and a push writes trees only for
its own new objects: its cost does not grow with the size of the remote.

Receiving trusts nothing (`unpack`): the tree shape is checked, every blob must BLAKE3-hash to the
name it came under and decode with the bounded decoder, and any fault rejects the whole transfer (E007).
"""

from __future__ import annotations

TREE_MODE = 0o040000
BLOB_MODE = 0o100644
IDENTITY = b"reelstore <sync@reelstore.invalid>"
REMOTE_PREFIX = "refs/reel/"


def git_ref(reel_ref: str) -> bytes:
    """`refs/heads/main` → `refs/reel/heads/main`."""
    return (REMOTE_PREFIX + reel_ref.removeprefix("refs/")).encode()


def reel_ref(git_name: bytes) -> str | None:
    """The inverse of `git_ref`, or None for a remote ref that is not a reel ref."""
    name = git_name.decode("utf-8", "replace")
    return "refs/" + name[len(REMOTE_PREFIX) :] if name.startswith(REMOTE_PREFIX) else None


def tracking_ref(remote: str, ref: str) -> str:
    """`refs/heads/main` of remote `origin` → `refs/remotes/origin/heads/main`."""
    return f"refs/remotes/{remote}/{ref.removeprefix('refs/')}"
