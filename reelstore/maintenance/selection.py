"""What gc keeps and what it prunes, decided per pack listing as flags (a few passes at C speed over
each pack's ids) from the walk, the grace period and the objects held twice."""

from __future__ import annotations

import array
import itertools
from collections.abc import Mapping, Sequence
from typing import cast

from reelstore.maintenance.mark import NOT, Listing
from reelstore.maintenance.reach import Walk
from reelstore.objects import Hash
from reelstore.objects.hash import as_hash


def _or(a: bytes, b: bytes) -> bytes:
    """Flags (bytes of 0 and 1) or-ed, in two C calls rather than one step per entry."""
    return (int.from_bytes(a, "big") | int.from_bytes(b, "big")).to_bytes(len(a), "big")


def _and(a: bytes, b: bytes) -> bytes:
    return (int.from_bytes(a, "big") & int.from_bytes(b, "big")).to_bytes(len(a), "big")


class Selection:
    """What gc keeps, from each pack's listing and the walk, as flags per listing rather than sets of
    every id (a few passes at C speed over each pack's ids): per verified pack, the positions to copy
    and the mtime each carries; the ids to pack afresh (loose only, or only in packs that do not
    verify); the counts, and the ids pruned.

    An id held twice (in several packs, or loose and packed: a crash between writing a pack and
    removing the loose copies, an object put again) is decided once, by its newest mtime, and copied
    from the first verified pack that has it."""

    def __init__(self, listed: list[Listing], loose: Mapping[Hash, float], w: Walk, cutoff: float | None) -> None:
        """`cutoff` None keeps every object (repack, gc --prune=never)."""
        reach, inflight = w.reachable, w.inflight
        everything = cutoff is None
        self.reuse: list[tuple[Listing, Sequence[int], Sequence[int]]] = []
        """(listing, positions to copy, the mtime each carries) per verified pack."""
        self.fresh: dict[Hash, int] = {}
        """id -> mtime of each object packed afresh."""
        self.pruned: list[bytes] = []
        self.candidates = self.kept = self.young = 0
        self.loose_kept: set[bytes] = set()
        """The loose ids kept (their files go only if unchanged since listed)."""
        twice, marks, newest = _held_twice(listed, loose)
        kept_twice: set[bytes] = set()
        for h in twice:
            self.candidates += 1
            if h in reach or everything or newest[h] >= cast(float, cutoff) or h in inflight:
                kept_twice.add(h)
                self.young += h not in reach
            else:
                self.pruned.append(h)
        self.kept = len(kept_twice)
        claimed: set[bytes] = set()
        for listing, shared in zip(listed, marks):
            ids, n = listing.ids, len(listing.ids)
            reached = bytes(map(reach.__contains__, ids))
            if everything:
                keep = b"\1" * n
            else:
                keep = reached
                if max(listing.mtimes, default=0) >= cast(float, cutoff):
                    keep = _or(keep, bytes(map(cast(float, cutoff).__le__, listing.mtimes)))
                if inflight:
                    keep = _or(keep, bytes(map(inflight.__contains__, ids)))
            here: list[int] = []
            if shared:
                alone = shared.translate(NOT)
                keep, reached = _and(keep, alone), _and(reached, alone)
                pruned = _and(keep.translate(NOT), alone)
                for i in itertools.compress(range(n), shared):
                    h = ids[i]
                    if h in kept_twice and h not in claimed and listing.sound:
                        claimed.add(h)
                        here.append(i)
            else:
                pruned = keep.translate(NOT)
            self.candidates += n - (shared.count(1) if shared else 0)
            kept = keep.count(1)
            self.kept += kept
            self.young += kept - reached.count(1)
            self.pruned.extend(itertools.compress(ids, pruned))
            if listing.sound:
                # Compact arrays: a list would hold an int object per entry for the rest of the run.
                positions = array.array("q", itertools.compress(range(n), keep))
                mtimes = array.array("q", itertools.compress(listing.mtimes, keep))
                if here:
                    extra = dict(zip(positions, mtimes))
                    extra.update((i, int(newest[ids[i]])) for i in here)
                    positions = array.array("q", sorted(extra))
                    mtimes = array.array("q", map(extra.__getitem__, positions))
                self.reuse.append((listing, positions, mtimes))
            else:
                for i in itertools.compress(range(n), keep):
                    self.fresh[as_hash(ids[i])] = listing.mtimes[i]
        for h in kept_twice - claimed:
            self.fresh[as_hash(h)] = int(newest[h])
        for h, mtime in loose.items():
            if h in twice:
                if h in kept_twice:
                    self.loose_kept.add(h)
                continue
            self.candidates += 1
            if h in reach or everything or mtime >= cast(float, cutoff) or h in inflight:
                self.kept += 1
                self.young += h not in reach
                self.loose_kept.add(h)
                self.fresh[h] = int(mtime)
            else:
                self.pruned.append(h)


def _held_twice(listed: list[Listing], loose: Mapping[Hash, float]
                ) -> tuple[set[bytes], list[bytes], dict[bytes, float]]:
    """The ids held more than once (in several packs, or packed and loose); per listing, which of its
    entries are those (b"" if none); and the newest mtime of each. Only the smaller packs' ids (and the
    loose ones) are ever held in a set: the largest pack's are looked up in it."""
    twice: set[bytes] = set()
    smaller: set[bytes] = set()
    for listing in listed[1:]:
        twice.update(smaller.intersection(listing.ids))
        smaller.update(listing.ids)
    if listed:
        twice.update((smaller | loose.keys()).intersection(listed[0].ids))
    twice.update(smaller.intersection(loose))
    newest: dict[bytes, float] = {}
    marks: list[bytes] = []
    for listing in listed:
        shared = bytes(map(twice.__contains__, listing.ids)) if twice else b""
        if shared.count(1) == 0:
            shared = b""
        for i in itertools.compress(range(len(shared)), shared):
            h = listing.ids[i]
            newest[h] = max(newest.get(h, 0), listing.mtimes[i])
        marks.append(shared)
    for h in twice.intersection(loose):
        newest[h] = max(newest.get(h, 0), loose[cast(Hash, h)])
    return twice, marks, newest
