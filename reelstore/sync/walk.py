"""A push's walk: the closure of its targets that the remote lacks, each object read and verified once.

The walk goes down a level at a time from the targets and stops at objects the sync state says the
remote holds. Each new object's verified canonical bytes go straight to the outgoing pack and are
then dropped; only objects with edges (blobs, the bulk of a store, have none) are read for them.

A level large enough to be worth it (an eighth of a pack's ids) is read in one loop over the pack's
map: id -> position, the ids and offsets read whole (for packs of up to `MAP_LIMIT` ids, as the bulk
reader maps them: a map costs ~150 bytes an id; larger packs are searched). A stored entry (what the
store's writer found incompressible, most of a store's bytes) is read right there, its canonical bytes
BLAKE3-hashed once against the id (E007 if not). Any other entry, and any entry not shaped as this
loop expects, goes through `BulkReader.read_raw`, which verifies the same way (CRC, inflation,
BLAKE3) and names the damage.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import blake3
import msgpack

from reelstore.errors import StorageError
from reelstore.objects import HASH_SIZE, Hash, decode
from reelstore.storage.bulk_read import MAP_LIMIT, BulkReader
from reelstore.storage.pack import KIND_CODES, KIND_TAGS, STORED, Pack
from reelstore.storage.repo import Repo
from reelstore.sync.state import SyncState

Take = Callable[[bytes, bytes, bool], None]
"""Hears of each new object: (id, canonical bytes, held stored by the store)."""

_LEAF, _TREE = KIND_TAGS[KIND_CODES["blob"]], KIND_TAGS[KIND_CODES["tree"]]
"""`blob\\0`, the canonical prefix of the one kind without edges, and `tree\\0`, a namespace node's."""


class _Mapped:
    """One pack, mapped for a level that reads many of its ids."""

    __slots__ = ("pack", "positions", "offsets", "map", "start", "end")

    def __init__(self, pack: Pack) -> None:
        self.pack = pack
        ids, self.offsets, _, _ = pack.index.columns()
        self.positions = dict(zip(ids, range(len(ids))))
        self.map, self.start, self.end = pack.map, pack.data_start, pack.data_end


class _Reader:
    """Verified canonical bytes of many ids: from mapped packs in one loop, else one at a time."""

    def __init__(self, repo: Repo) -> None:
        self.bulk = BulkReader(repo.objects)
        self.packs = self.bulk.packs
        self.mapped: dict[int, _Mapped] = {}

    def read(self, ids: Sequence[bytes], take: Take, inner: Callable[[bytes], None]) -> None:
        """Hand `take` each of `ids`, in order, with its canonical bytes and whether it is held stored,
        and `inner` the bytes of each that is not a blob; E007 on damage, and a StorageError naming the
        first id the store does not hold. An id a mapped pack holds is read from that pack, any other
        through `read_raw`.

        A stored entry in a mapped pack is read here: its canonical bytes are BLAKE3-hashed against the
        id, which covers everything the entry's CRC would (the kind code makes the tag, the size the
        extent, the method byte only says how to read it), so the CRC is not computed as well."""
        for k, pack in enumerate(self.packs):
            if k not in self.mapped and len(ids) * 8 > pack.count and pack.count <= MAP_LIMIT:
                self.mapped[k] = _Mapped(pack)
        maps = list(self.mapped.values())
        tags, stored_method, blob = KIND_TAGS, STORED, KIND_CODES["blob"]
        hasher = blake3.blake3()  # one, reset for each object: cheaper than a new one each time
        reset, update, digest = hasher.reset, hasher.update, hasher.digest
        for h in ids:
            raw, stored = None, True
            for mp in maps:
                i = mp.positions.get(h, -1)
                if i < 0:
                    continue
                off, m, end = mp.offsets[i], mp.map, mp.end
                # A stored entry's size and payload length are one varint written twice; when it is one
                # or two bytes the entry is read here, else by the pack (CRC, inflation, one hash).
                size = pos = -1
                if mp.start <= off <= end - 6:
                    code, method, a, b, c, d = m[off : off + 6]
                    if method == stored_method:
                        if a < 0x80 and b == a:
                            size, pos = a, off + 4
                        elif a >= 0x80 and b < 0x80 and c == a and d == b:
                            size, pos = (a & 0x7F) | b << 7, off + 6
                if size >= 0 and (tag := tags.get(code)) is not None and pos + size <= end:
                    raw = tag + m[pos : pos + size]
                    reset()
                    update(raw)
                    if digest() != h:
                        raise StorageError(f"object {h.hex()} in {mp.pack.name} is damaged: content does not "
                                           "hash to its id", id=Hash(h))
                else:
                    code, raw = mp.pack.read(h, i)
                    stored = m[off + 1] == stored_method  # the entry parsed: its method byte is there
                break
            if raw is not None:
                take(h, raw, stored)
                if code != blob:
                    inner(raw)
                continue
            found = self.bulk.read_raw(h)
            if found is None:
                raise StorageError(f"cannot push: object {h.hex()} is missing from this store", id=Hash(h))
            take(h, found[0], found[1])
            if not found[0].startswith(_LEAF):
                inner(found[0])


def _ignore(h: bytes, raw: bytes, stored: bool) -> None:
    """A walk that only lists ids takes nothing."""


def edges(raw: bytes) -> Sequence[bytes]:
    """The ids the object `raw` names. A namespace node (nearly all of what is not a blob) is read
    straight from its msgpack body, taking only its entries' ids: its bytes were just verified against
    its id, and were canonical when they entered the store, so the decoder's full check (a re-encode)
    adds nothing the walk needs. Any other kind, or a node not shaped as one, is decoded (E014 on
    anything malformed)."""
    if raw.startswith(_TREE):
        try:
            refs = [h for _, h in msgpack.unpackb(raw[len(_TREE) :], raw=True)[b"entries"]]
        except Exception:  # msgpack raises several unrelated types; the decoder below names the fault
            refs = [b""]
        if not refs or (set(map(type, refs)) == {bytes} and set(map(len, refs)) == {HASH_SIZE}):
            return refs
    return decode(raw).references()


def missing_on_remote(repo: Repo, state: SyncState, remote: str, targets: list[Hash],
                      take: Take | None = None) -> list[bytes]:
    """The closure of `targets` minus what the remote holds, walked down and stopped at known objects.
    Each new object is read once and handed with its bytes to `take` (the outgoing pack); blobs are not
    decoded and no object's bytes are kept."""
    out: list[bytes] = []
    visited: set[bytes] = set()
    frontier: list[bytes] = list(dict.fromkeys(targets))
    reader = _Reader(repo)
    nxt: list[bytes] = []

    def inner(raw: bytes) -> None:
        nxt.extend(edges(raw))  # what was visited already is dropped with what is known, level by level

    anything_known = state.knows_any(remote)
    while frontier:
        known = state.known(remote, frontier) if anything_known else set()
        new = [h for h in frontier if h not in known and h not in visited]
        visited.update(new)
        out += new
        nxt.clear()
        reader.read(new, take or _ignore, inner)
        frontier = list(dict.fromkeys(nxt))
    return out
