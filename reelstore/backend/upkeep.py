"""What a backend's `gc` and `fsck` take and give (and the reports of the disk store's repack and
prune), and how a backend that keeps no files of its own does both, object by object, through the
primitives every backend implements.

The layers above decide what is live (the refs, young reflog entries, writes in flight: maintenance's
walk) and hand it to `ObjectStore.gc` as a `Mark`, which the backend calls once it has listed its
candidates: anything written after the listing is no candidate, so a concurrent writer loses nothing.
The backend decides how its copies are kept and removed: the disk store packs what stays and deletes
files (backend/packs/pack_gc.py); the default here deletes object by object.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Protocol

from reelstore.errors import BadInput, NotFound, StorageError
from reelstore.objects.block import decode_verified
from reelstore.objects.hash import Hash, as_hash

if TYPE_CHECKING:
    from reelstore.backend.object_store import ObjectStore

Progress = Callable[[str, int, int | None], None]
"""Hears (phase, done, total or None) as a long gc or fsck goes."""


class Live(Protocol):
    """What is live, as the walk found it: what gc must keep whatever its age."""

    reachable: set[Hash]
    """Reached from a ref or a young reflog entry."""
    inflight: set[Hash]
    """Reached only from writes not yet referenced by a ref (kept, not counted reachable)."""
    kinds: dict[Hash, str]
    """The kind of each object the walk read (a backend that repacks learns it here)."""
    hints: dict[Hash, str]
    """A name each object was reached under (versions of one file are stored side by side)."""


Mark = Callable[[AbstractSet[bytes] | None, Callable[[Hash], bytes] | None], Live]
"""Marks what is live: called by the backend's gc after it lists its candidates, with ids it knows to be
kinds that reference nothing (counted reached unread; None: none) and a faster read for the walk (None:
`get_raw`). Refuses (E007) if the live set cannot be known in full."""


@dataclass
class GcReport:
    """What a gc found and did."""

    reachable: int = 0
    candidates: int = 0
    kept_recent: int = 0
    """Unreachable but younger than the grace period: kept (and packed, with their mtimes)."""
    pruned: int = 0
    """Unreachable and old: gone (or, with dry_run, would be)."""
    packed: int = 0
    """Objects kept (on disk, in the one pack gc leaves)."""
    pack: str | None = None
    packs_removed: int = 0
    loose_removed: int = 0
    temp_removed: int = 0
    """Temporary files left by a killed writer (older than an hour)."""
    dry_run: bool = False
    damaged_skipped: list[Hash] = field(default_factory=list)
    """Unreachable young objects that could not be read, so not kept (fsck names them)."""
    _pruned: Collection[bytes] = field(default_factory=list, repr=False, compare=False)

    @property
    def pruned_ids(self) -> list[Hash]:
        """The ids pruned (with dry_run, to be), sorted: built when first asked for, since a large gc's
        report is mostly read for its counts."""
        if not isinstance(self._pruned, list):
            self._pruned = sorted(map(as_hash, self._pruned))
        return list(self._pruned)

    @pruned_ids.setter
    def pruned_ids(self, ids: Collection[bytes]) -> None:
        self._pruned = ids

    def to_json(self) -> dict[str, Any]:
        doc = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("_pruned", "damaged_skipped")}
        doc["pruned_ids"] = [h.hex() for h in self.pruned_ids]
        doc["damaged_skipped"] = [h.hex() for h in self.damaged_skipped]
        return doc


@dataclass
class RepackReport:
    """What a repack did (as JSON, its fields)."""

    pack: str | None = None
    packed: int = 0
    packs_removed: int = 0
    loose_removed: int = 0
    methods: dict[str, int] = field(default_factory=dict)


@dataclass
class PruneReport:
    """What a prune removed (or, with dry_run, would) and kept as too young."""

    dry_run: bool = False
    removed: list[Hash] = field(default_factory=list)
    kept_recent: int = 0


@dataclass
class StoreCheck:
    """What a backend's own check found: every id it holds, how they are held, and what is damaged."""

    ids: set[Hash] = field(default_factory=set)
    loose: int = 0
    """Objects held one per copy (every object, in a store without packs)."""
    packs: int = 0
    packed: int = 0
    problems: list[str] = field(default_factory=list)


def collect(store: ObjectStore, mark: Mark, cutoff: float | None, *, dry_run: bool = False) -> GcReport:
    """gc object by object: list every id with its mtime, mark, then delete each unreachable object not
    in flight and older than `cutoff` (None: nothing), if it was not written again since it was listed."""
    listed: dict[Hash, float] = {}
    for h in store:
        try:
            listed[h] = store.mtime(h)
        except NotFound:
            continue  # deleted since it was listed
    live = mark(None, None)
    report = GcReport(reachable=len(live.reachable), candidates=len(listed), dry_run=dry_run)
    drop: list[Hash] = []
    for h, mtime in listed.items():
        if h in live.reachable:
            continue
        if cutoff is None or mtime >= cutoff or h in live.inflight:
            report.kept_recent += 1
        else:
            drop.append(h)
    report.pruned_ids = sorted(drop)
    report.pruned = len(drop)
    report.packed = len(listed) - len(drop)
    if not dry_run:
        for h in drop:
            if _unchanged(store, h, listed[h]):
                store.delete(h)
    return report


def _unchanged(store: ObjectStore, h: Hash, listed: float) -> bool:
    """Whether `h` is still there with the mtime it was listed with (a writer that put it again since
    made it young, and it stays)."""
    try:
        return store.mtime(h) <= listed
    except NotFound:
        return False


def check(store: ObjectStore, ids: Iterable[Hash], progress: Progress | None = None) -> StoreCheck:
    """Every object of `ids` read, re-hashed and decoded by its kind; each failure a problem naming it."""
    found = StoreCheck()
    for h in ids:
        found.loose += 1
        found.ids.add(h)
        try:
            decode_verified(store.get_raw(h), h)
        except NotFound:
            continue
        except StorageError as err:
            found.problems.append(f"loose {h.hex()}: {err.message}")
        except BadInput as exc:
            found.problems.append(f"loose {h.hex()}: object {h.hex()} is damaged: {exc.message}")
        if progress is not None and found.loose % 1000 == 0:
            progress("checking loose objects", found.loose, None)
    return found
