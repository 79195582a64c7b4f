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

Receiving trusts nothing: the tree shape is checked, every blob must BLAKE3-hash to the name it
came under and decode with the bounded decoder, and any fault rejects the whole transfer (E007).
"""

from __future__ import annotations

import struct
import time
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import IO

from dulwich.errors import ApplyDeltaError, ChecksumMismatch, FileFormatException
from dulwich.object_format import DEFAULT_OBJECT_FORMAT
from dulwich.objects import Blob as GitBlob
from dulwich.objects import Commit as GitCommit
from dulwich.objects import ShaFile
from dulwich.objects import Tree as GitTree
from dulwich.pack import PackData, PackInflater

from reelstore.codec import MAX_OBJECT_SIZE, MAX_TAG
from reelstore.errors import BadInput, StorageError
from reelstore.objects import Hash, Object, decode_verified
from reelstore.objects.hash import is_hex
from reelstore.sync.state import format_refs, parse_refs

TREE_MODE = 0o040000
BLOB_MODE = 0o100644
IDENTITY = b"reelstore <sync@reelstore.invalid>"
REMOTE_PREFIX = "refs/reel/"
_MAX_RAW = MAX_OBJECT_SIZE + MAX_TAG + 1
_DAMAGE = (ChecksumMismatch, ApplyDeltaError, FileFormatException, zlib.error, struct.error, KeyError, ValueError,
           AssertionError, EOFError, OSError)


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


@dataclass
class SyncCommit:
    """A sync commit ready to send: the commit and every git object it adds."""

    commit: GitCommit
    objects: list[ShaFile]

    @property
    def id(self) -> str:
        return self.commit.id.decode()


def build_commit(new: Iterable[tuple[Hash, bytes]], refs: dict[str, Hash], parents: list[str]) -> SyncCommit:
    """Wrap the objects new to the remote (id, canonical bytes) and the refs being set into one sync commit."""
    shards: dict[str, GitTree] = {}
    out: list[ShaFile] = []
    count = 0
    for rid, raw in new:
        blob = GitBlob.from_string(raw)
        hexid = rid.hex()
        shards.setdefault(hexid[:2], GitTree()).add(hexid[2:].encode(), BLOB_MODE, blob.id)
        out.append(blob)
        count += 1
    root = GitTree()
    if shards:
        fanout = GitTree()
        for prefix, shard in shards.items():
            fanout.add(prefix.encode(), TREE_MODE, shard.id)
            out.append(shard)
        out.append(fanout)
        root.add(b"objects", TREE_MODE, fanout.id)
    refs_blob = GitBlob.from_string(format_refs(refs))
    root.add(b"refs", BLOB_MODE, refs_blob.id)
    out += [refs_blob, root]
    commit = GitCommit()
    commit.tree = root.id
    commit.parents = [p.encode() for p in parents]
    commit.author = commit.committer = IDENTITY
    commit.author_time = commit.commit_time = int(time.time())
    commit.author_timezone = commit.commit_timezone = 0
    names = ", ".join(sorted(refs)) or "no refs"
    commit.message = f"reel sync: {count} objects; {names}\n".encode()
    out.append(commit)
    return SyncCommit(commit, out)


@dataclass
class Received:
    """What a fetch brought, verified: the new reel objects and each new sync commit's refs and parents."""

    objects: dict[Hash, Object] = field(default_factory=dict)
    commits: dict[str, dict[str, Hash]] = field(default_factory=dict)
    parents: dict[str, list[str]] = field(default_factory=dict)


def read_pack(stream: IO[bytes], size: int) -> dict[bytes, ShaFile]:
    """Every object of a received pack by git id, deltas resolved; E007 if the pack is damaged."""
    if size == 0:
        return {}
    stream.seek(0)
    data = None
    try:
        data = PackData.from_file(stream, DEFAULT_OBJECT_FORMAT, size)
        data.check()
        return {obj.id: obj for obj in PackInflater.for_pack_data(data)}
    except _DAMAGE as exc:
        raise StorageError(f"the remote sent a damaged pack: {type(exc).__name__}: {exc}") from None
    finally:
        if data is not None:
            data.close()


def unpack(pack: dict[bytes, ShaFile], have: Callable[[Hash], bool]) -> Received:
    """Turn the sync commits of a received pack into verified reel objects (E007 on any fault).

    A blob the pack lacks is acceptable only if this store already holds the reel object it names
    (the remote left it out because our haves reach it).
    """
    got = Received()
    try:
        for sha, obj in pack.items():
            if isinstance(obj, GitCommit):
                cid = sha.decode()
                tree = _get(pack, obj.tree, GitTree, f"tree of sync commit {cid}")
                got.commits[cid] = _read_root(pack, tree, got.objects, have, cid)
                got.parents[cid] = [p.decode() for p in obj.parents]
    except _DAMAGE as exc:
        raise StorageError(f"the remote sent a malformed git object: {type(exc).__name__}: {exc}") from None
    return got


def _get(pack: dict[bytes, ShaFile], sha: bytes, kind: type, what: str) -> ShaFile:
    obj = pack.get(sha)
    if not isinstance(obj, kind):
        raise StorageError(f"remote sent a sync commit without its {what} ({sha.decode()})")
    return obj


class Omitted(Exception):
    """The remote left out a sync commit's refs file because our haves reach an identical one; the
    fetch is then redone without haves, since the refs cannot be read from anything else."""


def _subtree(pack: dict[bytes, ShaFile], sha: bytes, what: str) -> ShaFile | None:
    """A fan-out tree, or None when the remote left it out: git omits a tree that our haves reach, so
    every object under it was already sent to us (the fetch's closure check confirms it)."""
    return None if sha not in pack else _get(pack, sha, GitTree, what)


def _read_root(pack: dict[bytes, ShaFile], tree: ShaFile, objects: dict[Hash, Object],
               have: Callable[[Hash], bool], cid: str) -> dict[str, Hash]:
    entries = {e.path: e for e in tree.iteritems()}
    if set(entries) - {b"objects", b"refs"} or b"refs" not in entries or entries[b"refs"].mode != BLOB_MODE:
        raise StorageError(f"sync commit {cid} does not have the tree of a sync commit")
    if entries[b"refs"].sha not in pack:
        raise Omitted(cid)
    refs = parse_refs(_get(pack, entries[b"refs"].sha, GitBlob, "refs file").as_raw_string())
    fanout = entries.get(b"objects")
    if fanout is not None:
        if fanout.mode != TREE_MODE:
            raise StorageError(f"sync commit {cid}: objects is not a tree")
        shards = _subtree(pack, fanout.sha, "objects tree")
        for shard in shards.iteritems() if shards is not None else ():
            if shard.mode != TREE_MODE or len(shard.path) != 2 or not is_hex(shard.path.decode("latin-1")):
                raise StorageError(f"sync commit {cid}: bad fan-out entry {shard.path!r}")
            leaves = _subtree(pack, shard.sha, "fan-out tree")
            for entry in leaves.iteritems() if leaves is not None else ():
                _read_object(pack, shard.path + entry.path, entry, objects, have, cid)
    return refs


def _read_object(pack: dict[bytes, ShaFile], name: bytes, entry: object, objects: dict[Hash, Object],
                 have: Callable[[Hash], bool], cid: str) -> None:
    try:
        rid = Hash.from_hex(name.decode("ascii"))
    except (UnicodeDecodeError, BadInput):
        raise StorageError(f"sync commit {cid}: {name!r} is not a reel object id") from None
    if entry.mode != BLOB_MODE:
        raise StorageError(f"sync commit {cid}: object {rid.hex()} is not a plain blob")
    blob = pack.get(entry.sha)
    if blob is None:
        if have(rid) or rid in objects:
            return
        raise StorageError(f"the remote did not send object {rid.hex()}", id=rid)
    if not isinstance(blob, GitBlob) or blob.raw_length() > _MAX_RAW:
        raise StorageError(f"object {rid.hex()} arrived as a {blob.type_name.decode()} or oversized", id=rid)
    raw = blob.as_raw_string()
    if Hash.of(raw) != rid:
        raise StorageError(f"object {rid.hex()} from the remote does not hash to its name", id=rid)
    try:
        objects[rid] = decode_verified(raw, rid)
    except BadInput as exc:
        raise StorageError(f"object {rid.hex()} from the remote does not decode: {exc.message}", id=rid) from None
