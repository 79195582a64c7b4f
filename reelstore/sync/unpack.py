"""Reading the sync commits of a received pack into verified reel objects (see `mapping` for their
shape): the tree shape is checked, every blob must BLAKE3-hash to the name it came under and decode
with the bounded decoder, and any fault rejects the whole transfer (E007). Git commits and trees are
read straight from their bytes (`commit_links`, `tree_entries`), as strictly as git writes them."""

from __future__ import annotations

import binascii
import functools
import re
from collections.abc import Callable
from dataclasses import dataclass, field

import blake3

from reelstore.backend.object_store import ObjectStore
from reelstore.errors import BadInput, StorageError
from reelstore.objects import Blob, Hash, Object, decode_verified
from reelstore.objects.hash import as_hash, is_hex
from reelstore.sync.incoming import MAX_RAW, TYPE_NAMES, ReceivedPack
from reelstore.sync.mapping import BLOB_MODE, TREE_MODE
from reelstore.sync.state import parse_refs

_BLOB_TAG = b"blob\x00"
_COMMIT, _TREE = 1, 2
_ENTRY = re.compile(rb"([0-7]+) ([^\0]+)\0(.{20})", re.DOTALL)
"""One git tree entry: octal mode, a space, a name up to its NUL, the 20-byte SHA-1."""
_LEAF_MODE = b"%o" % BLOB_MODE
_LEAF_NAME = 62
"""A fan-out leaf's name: the 64 hex digits of a reel id less the two its shard is named by."""
_SHA_HEX = re.compile(rb"[0-9a-f]{40}")

GitEntry = tuple[bytes, bytes, bytes]
"""(mode as written, name, binary SHA-1) of one git tree entry."""


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
    for sha, (kind, raw) in pack.meta.items():
        if kind == _COMMIT:
            cid = sha.hex()
            root, parents = commit_links(raw)
            tree = _tree(pack, root, f"tree of sync commit {cid}")
            got.commits[cid] = _read_root(pack, tree, got, have, cid)
            got.parents[cid] = [p.hex() for p in parents]
    return got


def _malformed(what: str) -> StorageError:
    return StorageError(f"the remote sent a malformed git object: {what}")


def commit_links(raw: bytes) -> tuple[bytes, list[bytes]]:
    """The binary SHA-1s of a git commit's tree and parents: its first header line names the tree, the
    lines right after it the parents, each by 40 lowercase hex digits (as git writes and fsck wants)."""
    end = raw.find(b"\n\n")
    lines = (raw if end < 0 else raw[:end]).split(b"\n")
    head = lines[0]
    if not head.startswith(b"tree ") or not _SHA_HEX.fullmatch(head, 5):
        raise _malformed("a commit whose first line does not name its tree")
    parents = []
    for line in lines[1:]:
        if not line.startswith(b"parent "):
            break
        if not _SHA_HEX.fullmatch(line, 7):
            raise _malformed("a commit with a malformed parent line")
        parents.append(bytes.fromhex(line[7:].decode("ascii")))
    return bytes.fromhex(head[5:].decode("ascii")), parents


def tree_entries(body: bytes) -> list[GitEntry]:
    """Every entry of a git tree, in order; E007 unless the entries make up the whole body. The
    entries are found in one regular-expression pass: matches never overlap, so they cover the body
    exactly when each begins where the one before it ended, which is where a sequential parse would
    read it (a mode runs to the space, a name to the NUL, then 20 bytes)."""
    entries: list[GitEntry] = _ENTRY.findall(body)
    covered = 22 * len(entries) + sum(len(mode) + len(name) for mode, name, _ in entries)
    if covered != len(body):
        raise _malformed("a tree that does not parse")
    return entries


def _tree(pack: ReceivedPack, sha: bytes, what: str) -> list[GitEntry]:
    found = pack.meta.get(sha)
    if found is None or found[0] != _TREE:
        raise StorageError(f"remote sent a sync commit without its {what} ({sha.hex()})")
    return tree_entries(found[1])


def _refs_file(pack: ReceivedPack, sha: bytes) -> bytes:
    raw = pack.raws.get(sha)
    if raw is None:
        raise StorageError(f"remote sent a sync commit without its refs file ({sha.hex()})")
    return raw


class Omitted(Exception):
    """The remote left out a sync commit's refs file because our haves reach an identical one; the
    fetch is then redone without haves, since the refs cannot be read from anything else."""


def _subtree(pack: ReceivedPack, sha: bytes, what: str) -> list[GitEntry]:
    """A fan-out tree's entries, or none when the remote left it out: git omits a tree that our haves
    reach, so every object under it was already sent to us (the fetch's closure check confirms it)."""
    return [] if sha not in pack else _tree(pack, sha, what)


def _mode(mode: bytes) -> int:
    return int(mode, 8)


def _read_root(
    pack: ReceivedPack, tree: list[GitEntry], got: Received, have: Callable[[Hash], bool], cid: str
) -> dict[str, Hash]:
    entries = {name: (mode, sha) for mode, name, sha in tree}
    if (
        len(entries) != len(tree)
        or set(entries) - {b"objects", b"refs"}
        or b"refs" not in entries
        or _mode(entries[b"refs"][0]) != BLOB_MODE
    ):
        raise StorageError(f"sync commit {cid} does not have the tree of a sync commit")
    if entries[b"refs"][1] not in pack:
        raise Omitted(cid)
    refs = parse_refs(_refs_file(pack, entries[b"refs"][1]))
    fanout = entries.get(b"objects")
    if fanout is not None:
        if _mode(fanout[0]) != TREE_MODE:
            raise StorageError(f"sync commit {cid}: objects is not a tree")
        for mode, shard, sha in _subtree(pack, fanout[1], "objects tree"):
            if _mode(mode) != TREE_MODE or len(shard) != 2 or not is_hex(shard.decode("latin-1")):
                raise StorageError(f"sync commit {cid}: bad fan-out entry {shard!r}")
            _read_shard(pack, shard, _subtree(pack, sha, "fan-out tree"), got, have, cid)
    return refs


def _read_shard(
    pack: ReceivedPack, shard: bytes, leaves: list[GitEntry], got: Received, have: Callable[[Hash], bool], cid: str
) -> None:
    """The objects of one fan-out tree. Leaves shaped as a reel push writes them (mode 100644, 62
    lowercase hex digits: checked for the whole shard at once) whose git blob holds a reel blob are
    checked here, in one loop: BLAKE3 against the id, the msgpack bin header as the decoder checks it.
    Anything else goes through `_read_object`, which checks it alone and names what is wrong."""
    names = [name for _, name, _ in leaves]
    joined = b"".join(names)
    try:
        ids = binascii.unhexlify(joined)
    except binascii.Error:
        ids = b""
    if (
        not leaves
        or {mode for mode, _, _ in leaves} != {_LEAF_MODE}
        or set(map(len, names)) != {_LEAF_NAME}
        or len(ids) != len(leaves) * (_LEAF_NAME // 2)
        or joined != joined.lower()
    ):
        for mode, name, sha in leaves:
            _read_object(pack, shard + name, mode, sha, got, have, cid)
        return
    first = bytes.fromhex(shard.decode("ascii"))
    step = _LEAF_NAME // 2
    rids = [as_hash(first + ids[i : i + step]) for i in range(0, len(ids), step)]
    out = got.raws
    hasher = blake3.blake3()  # one, reset for each object: cheaper than a new one each time
    reset, update, digest = hasher.reset, hasher.update, hasher.digest
    for rid, raw, (mode, name, sha) in zip(rids, map(pack.raws.get, [sha for _, _, sha in leaves]), leaves):
        if raw is None or (head := blob_prefix(len(raw))) is None or not raw.startswith(head):
            # not a reel blob in canonical form: checked alone, and named if it is at fault
            _read_object(pack, shard + name, mode, sha, got, have, cid)
            continue
        reset()
        update(raw)
        if digest() != rid:
            raise StorageError(f"object {rid.hex()} from the remote does not hash to its name", id=rid)
        out[rid] = raw


def _read_object(
    pack: ReceivedPack, name: bytes, mode: bytes, sha: bytes, got: Received, have: Callable[[Hash], bool], cid: str
) -> None:
    try:
        rid = Hash(bytes.fromhex(name.decode("ascii")))
    except (UnicodeDecodeError, ValueError, BadInput):
        rid = None
    if rid is None or rid.hex().encode() != name:  # 64 lowercase hex digits, nothing else
        raise StorageError(f"sync commit {cid}: {name!r} is not a reel object id")
    if _mode(mode) != BLOB_MODE:
        raise StorageError(f"sync commit {cid}: object {rid.hex()} is not a plain blob")
    staged = pack.staged.get(sha)
    if staged is not None:
        if staged != rid:
            raise StorageError(f"object {rid.hex()} from the remote does not hash to its name", id=rid)
        got.staged.add(rid)
        return
    raw = pack.raws.get(sha)
    if raw is None:
        if sha in pack.meta:
            kind = TYPE_NAMES[pack.meta[sha][0]].decode()
            raise StorageError(f"object {rid.hex()} arrived as a {kind}", id=rid)
        if have(rid) or rid in got:
            return
        raise StorageError(f"the remote did not send object {rid.hex()}", id=rid)
    if len(raw) > MAX_RAW:
        raise StorageError(f"object {rid.hex()} arrived oversized", id=rid)
    if raw.startswith(_BLOB_TAG):  # checked in place, not built into an object
        if blake3.blake3(raw).digest() != rid:
            raise StorageError(f"object {rid.hex()} from the remote does not hash to its name", id=rid)
        if not canonical_blob(raw):
            raise StorageError(
                f"object {rid.hex()} from the remote does not decode: blob body is not a single "
                "msgpack bin in canonical form",
                id=rid,
            )
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
    head = blob_prefix(len(raw))
    return head is not None and raw.startswith(head)


@functools.lru_cache(maxsize=4096)
def blob_prefix(size: int) -> bytes | None:
    """The first bytes of every canonical reel blob of `size` bytes (`blob\\0` and its msgpack bin header),
    or None if no blob has that size or it is over MAX_RAW. The header's width follows from the size
    alone: a bin of n bytes takes the shortest of 1, 2 or 4 length bytes, so a size of 6 + w + n bytes
    fits exactly one width, or none (263, 65544 and 65545 bytes fit none)."""
    if size > MAX_RAW:
        return None
    for width, marker in ((1, 0xC4), (2, 0xC5), (4, 0xC6)):
        n = size - 6 - width
        if 0 <= n < 1 << (8 * width) and (width == 1 or n >= 1 << (4 * width)):
            return _BLOB_TAG + bytes([marker]) + n.to_bytes(width, "big")
    return None
