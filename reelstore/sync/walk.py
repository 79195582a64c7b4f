"""A push's walk: the closure of its targets that the remote lacks, each object read and verified once.

The walk goes down a level at a time from the targets and stops at objects the sync state says the
remote holds. Each new object's verified canonical bytes go straight to the outgoing pack and are
then dropped; only objects with edges (blobs, the bulk of a store, have none) are read for them.

Each level is read through the store's bulk reader (`BulkReader.read_many`), which reads a level
large enough to be worth it straight from the store's own files, each object verified against its id
(E007 on damage), and the rest one at a time.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgpack

from reelstore.backend.packs.bulk_read import BulkReader, Take
from reelstore.backend.repo import Repo
from reelstore.objects import HASH_SIZE, Hash, decode
from reelstore.sync.state import SyncState

_TREE = b"tree\0"
"""A namespace node's canonical prefix."""


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


def missing_on_remote(
    repo: Repo, state: SyncState, remote: str, targets: list[Hash], take: Take | None = None
) -> list[bytes]:
    """The closure of `targets` minus what the remote holds, walked down and stopped at known objects.
    Each new object is read once and handed with its bytes to `take` (the outgoing pack); blobs are not
    decoded and no object's bytes are kept."""
    out: list[bytes] = []
    visited: set[bytes] = set()
    frontier: list[bytes] = list(dict.fromkeys(targets))
    reader = BulkReader(repo.objects)
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
        reader.read_many(new, take or _ignore, inner, "push")
        frontier = list(dict.fromkeys(nxt))
    return out
