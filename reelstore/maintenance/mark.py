"""gc's mark: every pack listed (its index read in bulk, its checksums verified, each entry's kind from
its first byte), what is reachable from the refs and young reflog entries (leaves counted from their
headers, trees read straight from their entries), then the fence against concurrent writers."""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable, Mapping
from collections.abc import Set as AbstractSet

from reelstore.errors import StorageError
from reelstore.maintenance.age import DEFAULT_REFLOG_EXPIRE, config_cutoff
from reelstore.maintenance.reach import Walk, ref_roots, walk
from reelstore.objects import Hash
from reelstore.storage.object_store import ObjectStore
from reelstore.storage.pack import KIND_CODES, Pack
from reelstore.storage.repo import Repo

HELD_RAW = 64 * 1024
"""An object gc must read before packing (to learn its kind) is kept in memory up to this size; every
other object is read by the pack writer when its turn comes, so gc's memory does not grow with the
store's bytes."""
Progress = Callable[[str, int, int | None], None]


def require_complete(w: Walk, what: str) -> None:
    if w.complete:
        return
    bad = [f"missing {h.hex()} (from {via})" for h, via in list(w.missing.items())[:5]]
    bad += [f"damaged {h.hex()}: {msg}" for h, msg in list(w.damaged.items())[:5]]
    raise StorageError(f"{what} refused: the reachable set is incomplete ({'; '.join(bad)}); run `reel fsck`",
                       missing=len(w.missing), damaged=len(w.damaged))


def mark(repo: Repo, now: float, progress: Progress | None, leaves: AbstractSet[bytes] | None = None,
         read: Callable[[Hash], bytes] | None = None) -> Walk:
    """Everything reachable from the refs and young reflog entries, then the fence (see `_fence`)."""
    since = config_cutoff(repo, "gc.reflogExpire", DEFAULT_REFLOG_EXPIRE, now)
    since_ms = 0 if since is None else int(since * 1000)
    tick = (lambda n: progress("marking", n, None)) if progress else None
    roots = ref_roots(repo.refs, since_ms)
    w = walk(repo.objects, roots, progress=tick, leaves=leaves, read=read)
    _fence(repo, w, roots, since_ms, leaves, read)
    return w


FENCE_ROUNDS = 3


def _fence(repo: Repo, w: Walk, roots: list[tuple[str, Hash]], since_ms: int,
           leaves: AbstractSet[bytes] | None, read: Callable[[Hash], bytes] | None = None) -> None:
    """After marking, add what concurrent writers may reference next: every id a live writer registered
    and has not yet referenced from a landed ref transaction (storage/inflight.py), then the refs as they
    are now. One round suffices for a writer that registers: if gc reads its registration before it
    settles, its objects are kept; if after, its ref move landed before gc re-reads the refs. So an
    object listed as a candidate before the mark and unreachable after the fence is not about to be
    referenced by a write that began before the listing. Up to FENCE_ROUNDS rounds are read until two
    readings of the refs agree, which also catches an object moving between two refs mid-reading for a
    writer that does not register."""
    before = roots
    for _ in range(FENCE_ROUNDS):
        protected = repo.objects.protected()
        now = ref_roots(repo.refs, since_ms)
        if not any(map(_unknown(w), itertools.chain((h for _, h in now), protected))):
            # Nothing new since the mark (the usual case): no walk, and no copy of the reached set.
            if now == before:
                return
            before = now
            continue
        done = w.reachable | w.inflight | set(w.missing) | set(w.damaged)
        moved = walk(repo.objects, [(n, h) for n, h in now if h not in done], known=done, leaves=leaves, read=read)
        done |= moved.reachable | set(moved.missing) | set(moved.damaged)
        pending = walk(repo.objects, [("an in-flight write", h) for h in protected - done], known=done,
                       leaves=leaves, read=read)
        # An in-flight write may not be on disk yet (or ever, if its writer fails), or be caught between
        # its pack's rename and its index's (then it reads as unusable, not absent): what its walk misses
        # is not damage; what it reaches is kept. Real damage is fsck's to name.
        pending.missing.clear()
        pending.damaged.clear()
        w.inflight |= pending.reachable
        for more in (moved, pending):
            if more is moved:
                w.reachable |= more.reachable
            w.kinds.update(more.kinds)
            w.damaged.update(more.damaged)
            w.missing.update(more.missing)
            for h, name in more.hints.items():
                w.hints.setdefault(h, name)
        if now == before:
            return
        before = now


def _unknown(w: Walk) -> Callable[[bytes], bool]:
    """Whether an id is not yet reached, kept in flight, missing or damaged in `w`."""
    return lambda h: not (h in w.reachable or h in w.inflight or h in w.missing or h in w.damaged)


LEAF_CODES = frozenset(KIND_CODES[kind] for kind in ("blob", "capability", "effect"))
"""Pack codes of the kinds that reference nothing: the walk needs no more than an entry's header for them.
Named here rather than found from every kind's class, so gc does not import every kind to start (a test
checks the list against the classes)."""
_LEAF_TABLE = bytes(code in LEAF_CODES for code in range(256))
NOT = bytes([1, 0]) + bytes(254)
"""bytes.translate tables: an entry's kind code to 1 for a leaf kind; a flag of 0 or 1 to its opposite."""


class Listing:
    """One pack's index, read in bulk, and whether its checksums verify: only then are its leaves
    trusted from their headers and its entries copied as they are stored."""

    def __init__(self, pack: Pack) -> None:
        self.pack = pack
        self.columns = pack.index.columns()
        self.ids, self.offsets, _, self.mtimes = self.columns
        self.sound = pack.checksums_ok()
        self.codes = b""
        """Each entry's kind code, in index order (sound packs, once `kinds` has run)."""

    def kinds(self) -> bytes:
        """Every entry's kind code, from its first byte, read in one go (the pages read are let go at once)."""
        if self.sound and self.ids and not self.codes:
            m, offsets = self.pack.map, self.offsets
            self.codes = bytes(operator.itemgetter(*offsets)(m) if len(offsets) > 1 else (m[offsets[0]],))
            self.pack.release_pages()
        return self.codes


def list_packs(store: ObjectStore) -> list[Listing]:
    """Every pack's listing, the largest first: an object in several packs is copied from the first."""
    return [Listing(p) for p in sorted(store.packs(), key=lambda p: -p.count)]


def find_leaves(listed: list[Listing]) -> tuple[set[bytes], dict[bytes, tuple[Pack, int]]]:
    """The ids stored as a kind that references nothing in a verified pack (the walk counts them as reached
    unread), and where the other entries of verified packs are (the walk reads those from there)."""
    leaves: set[bytes] = set()
    direct: dict[bytes, tuple[Pack, int]] = {}
    for listing in listed:
        codes = listing.kinds()
        if not codes:
            continue
        flags = codes.translate(_LEAF_TABLE)
        leaves.update(itertools.compress(listing.ids, flags))
        for i in itertools.compress(range(len(flags)), flags.translate(NOT)):
            direct.setdefault(listing.ids[i], (listing.pack, i))
    return leaves, direct


class Reader:
    """get_raw for the walk: an object whose entry the listing found is read (and re-hashed) straight
    from it, without a search of every index; anything else, or an entry that fails, as get_raw reads it.
    What is read from elsewhere (loose objects, mostly: a few recent writes) is kept, small ones up to
    HELD_TOTAL bytes in all, for the pack writer, which would otherwise read each again."""

    def __init__(self, store: ObjectStore, direct: Mapping[bytes, tuple[Pack, int]]) -> None:
        self.store, self.direct = store, direct
        self.held: dict[bytes, bytes] = {}
        self._room = HELD_TOTAL

    def __call__(self, h: Hash) -> bytes:
        hit = self.direct.get(h)
        if hit is not None:
            try:
                return hit[0].read(h, hit[1])[1]
            except StorageError:
                pass  # another copy (a loose one, another pack) may be sound: get_raw looks for it
        raw = self.store.get_raw(h)
        if len(raw) <= min(HELD_RAW, self._room):
            self.held[h] = raw
            self._room -= len(raw)
        return raw


HELD_TOTAL = 4 << 20
"""Most bytes of objects the walk read from outside the verified packs that gc keeps for the writer."""
