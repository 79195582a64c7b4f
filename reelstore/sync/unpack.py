"""Reading the sync commits of a received pack into verified reel objects (see `mapping` for their
shape): the tree shape is checked, every blob must BLAKE3-hash to the name it came under and decode
with the bounded decoder, and any fault rejects the whole transfer (E007). Imported only by a fetch,
with dulwich's object model."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import blake3
from dulwich.errors import ApplyDeltaError, ChecksumMismatch, FileFormatException
from dulwich.objects import Commit as GitCommit
from dulwich.objects import ShaFile
from dulwich.objects import Tree as GitTree

from reelstore.errors import BadInput, StorageError
from reelstore.objects import Blob, Hash, Object, decode_verified
from reelstore.objects.hash import is_hex
from reelstore.storage.object_store import ObjectStore
from reelstore.sync.incoming import MAX_RAW, ReceivedPack
from reelstore.sync.mapping import BLOB_MODE, TREE_MODE
from reelstore.sync.state import parse_refs

_BLOB_TAG = b"blob\x00"
_BIN_WIDTH = {0xC4: 1, 0xC5: 2, 0xC6: 4}
_Git = TypeVar("_Git", bound=ShaFile)
_DAMAGE = (ChecksumMismatch, ApplyDeltaError, FileFormatException, zlib.error, struct.error, KeyError, ValueError,
           AssertionError, EOFError, OSError)


@dataclass
class Received:
    """What a fetch brought, verified: each new reel object's canonical bytes (hashed and decoded), the
    decoded objects that have references (for the closure check), and each new sync commit's refs and
    parents.

    Large blobs (pieces of large content) are not held: they wait in `staging`, a store of their own,
    and `staged` lists them."""

    raws: dict[Hash, bytes] = field(default_factory=dict)
    nodes: dict[Hash, Object] = field(default_factory=dict)
    """Every received object but blobs, decoded."""
    commits: dict[str, dict[str, Hash]] = field(default_factory=dict)
    parents: dict[str, list[str]] = field(default_factory=dict)
    staged: set[Hash] = field(default_factory=set)
    staging: ObjectStore | None = None

    def ids(self) -> list[Hash]:
        return [*self.raws, *self.staged]

    def __contains__(self, rid: object) -> bool:
        return rid in self.raws or rid in self.staged

    def kind(self, rid: Hash) -> str | None:
        """The kind of a received object, or None if it was not received."""
        node = self.nodes.get(rid)
        return node.kind if node is not None else Blob.kind if rid in self else None


def unpack(pack: ReceivedPack, have: Callable[[Hash], bool]) -> Received:
    """Turn the sync commits of a received pack into verified reel objects (E007 on any fault).

    A blob the pack lacks is acceptable only if this store already holds the reel object it names
    (the remote left it out because our haves reach it).
    """
    got = Received(staging=pack.staging)
    try:
        for sha, obj in pack.meta.items():
            if isinstance(obj, GitCommit):
                cid = sha.decode()
                tree = _get(pack, obj.tree, GitTree, f"tree of sync commit {cid}")
                got.commits[cid] = _read_root(pack, tree, got, have, cid)
                got.parents[cid] = [p.decode() for p in obj.parents]
    except _DAMAGE as exc:
        raise StorageError(f"the remote sent a malformed git object: {type(exc).__name__}: {exc}") from None
    return got


def _get(pack: ReceivedPack, sha: bytes, kind: type[_Git], what: str) -> _Git:
    obj = pack.meta.get(sha)
    if not isinstance(obj, kind):
        raise StorageError(f"remote sent a sync commit without its {what} ({sha.decode()})")
    return obj


def _refs_file(pack: ReceivedPack, sha: bytes) -> bytes:
    raw = pack.raws.get(sha)
    if raw is None:
        raise StorageError(f"remote sent a sync commit without its refs file ({sha.decode()})")
    return raw


class Omitted(Exception):
    """The remote left out a sync commit's refs file because our haves reach an identical one; the
    fetch is then redone without haves, since the refs cannot be read from anything else."""


def _subtree(pack: ReceivedPack, sha: bytes, what: str) -> GitTree | None:
    """A fan-out tree, or None when the remote left it out: git omits a tree that our haves reach, so
    every object under it was already sent to us (the fetch's closure check confirms it)."""
    return None if sha not in pack else _get(pack, sha, GitTree, what)


def _read_root(pack: ReceivedPack, tree: GitTree, got: Received, have: Callable[[Hash], bool],
               cid: str) -> dict[str, Hash]:
    entries = {e.path: e for e in tree.iteritems()}
    if set(entries) - {b"objects", b"refs"} or b"refs" not in entries or entries[b"refs"].mode != BLOB_MODE:
        raise StorageError(f"sync commit {cid} does not have the tree of a sync commit")
    if entries[b"refs"].sha not in pack:
        raise Omitted(cid)
    refs = parse_refs(_refs_file(pack, entries[b"refs"].sha))
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
                _read_object(pack, shard.path + entry.path, entry, got, have, cid)
    return refs


def _read_object(pack: ReceivedPack, name: bytes, entry: Any, got: Received, have: Callable[[Hash], bool],
                 cid: str) -> None:
    try:
        rid = Hash(bytes.fromhex(name.decode("ascii")))
    except (UnicodeDecodeError, ValueError, BadInput):
        rid = None
    if rid is None or rid.hex().encode() != name:  # 64 lowercase hex digits, nothing else
        raise StorageError(f"sync commit {cid}: {name!r} is not a reel object id")
    if entry.mode != BLOB_MODE:
        raise StorageError(f"sync commit {cid}: object {rid.hex()} is not a plain blob")
    staged = pack.staged.get(entry.sha)
    if staged is not None:
        if staged != rid:
            raise StorageError(f"object {rid.hex()} from the remote does not hash to its name", id=rid)
        got.staged.add(rid)
        return
    raw = pack.raws.get(entry.sha)
    if raw is None:
        if entry.sha in pack.meta:
            raise StorageError(f"object {rid.hex()} arrived as a {pack.meta[entry.sha].type_name.decode()}", id=rid)
        if have(rid) or rid in got:
            return
        raise StorageError(f"the remote did not send object {rid.hex()}", id=rid)
    if len(raw) > MAX_RAW:
        raise StorageError(f"object {rid.hex()} arrived oversized", id=rid)
    if raw.startswith(_BLOB_TAG):  # the bulk of a transfer: checked in place, not built into an object
        if blake3.blake3(raw).digest() != rid:
            raise StorageError(f"object {rid.hex()} from the remote does not hash to its name", id=rid)
        if not canonical_blob(raw):
            raise StorageError(f"object {rid.hex()} from the remote does not decode: blob body is not a single "
                               "msgpack bin in canonical form", id=rid)
        got.raws[rid] = raw
        return
    try:
        obj = decode_verified(raw, rid)
    except BadInput as exc:
        if Hash.of(raw) != rid:
            raise StorageError(f"object {rid.hex()} from the remote does not hash to its name", id=rid) from None
        raise StorageError(f"object {rid.hex()} from the remote does not decode: {exc.message}", id=rid) from None
    got.raws[rid] = raw
    if not isinstance(obj, Blob):
        got.nodes[rid] = obj


def canonical_blob(raw: bytes) -> bool:
    """Would the bounded decoder take `raw` (`blob\\0` and at most MAX_RAW bytes) as a blob? Its body must be
    one msgpack bin with the shortest header for its length, exactly as `Blob.from_canonical` checks it,
    but no object is built (a tested equivalence)."""
    width = _BIN_WIDTH.get(raw[5] if len(raw) > 5 else -1)
    if width is None:
        return False
    n = len(raw) - 6 - width
    shortest = 1 if n < 1 << 8 else 2 if n < 1 << 16 else 4
    return width == shortest and int.from_bytes(raw[6 : 6 + width], "big") == n
