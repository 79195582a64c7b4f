"""The packs of one pack directory as a reader sees them: listed when the directory changes, opened
when a lookup first reaches them, newest first.

Packs come and go under a running reader (gc writes a new pack, then deletes the old ones), so the
listing is redone whenever the directory's stamp moves (and after a miss while the stamp may lag: git's
racy-git rule). A pack is only listed at a scan; its index and file are mapped when a lookup first
reaches it, so a read that the newest packs (or a loose file) answer opens none of the rest. A pack
whose index is missing, or whose trailer does not match its index, is never used: it is named in
`problems`. A dead writer's pack without an index, or with a torn one, gets its index rebuilt.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from reelstore.backend.packs.pack import Pack
from reelstore.errors import StorageError

RACY_NS = 2_000_000_000
"""A scan this soon after the pack directory's last change may miss a later one (see `racy`)."""

NO_INDEX = "pack has no index"


class PackSet:
    """The pack directory `pack_dir`'s packs, for one store."""

    def __init__(self, pack_dir: Path, *, fsync: bool = True) -> None:
        self.pack_dir = pack_dir
        self.fsync = fsync
        self._packs: dict[str, Pack] = {}
        """The packs opened so far, by stem."""
        self._pending: dict[str, Path] = {}
        """Packs listed by the last scan and not opened yet."""
        self._order: list[str] = []
        """Every listed pack's stem, newest first."""
        self._ages: dict[str, int] = {}
        """Each listed pack file's mtime (ns), read once when first listed."""
        self._failed: dict[str, str] = {}
        """Listed packs that could not be opened, with the reason."""
        self._open_guard = threading.RLock()
        self.problems: dict[str, str] = {}
        """Unusable pack files by name, with the reason: as listed, and as found by opening."""
        self._scanned: int | None = None
        self._scan_time = 0

    def forget(self) -> None:
        """Rescan at the next lookup (this process has just added a pack)."""
        self._scanned = None

    def close(self) -> None:
        with self._open_guard:
            for pack in self._packs.values():
                pack.close()
            self._packs.clear()
            self._ages.clear()
            self._failed.clear()
            self._scanned = None

    def _dir_stamp(self) -> int:
        try:
            return self.pack_dir.stat().st_mtime_ns
        except FileNotFoundError:
            return 0

    def refresh(self, force: bool = False) -> bool:
        """Rescan the pack directory if it changed; True if the set of packs changed. A new pack is only
        listed here (newest first, by its file's mtime) and opened when a lookup first reaches it, so a
        read answered by the newest packs or a loose file never opens the rest."""
        stamp = self._dir_stamp()
        if not force and stamp == self._scanned:
            return False
        self._scanned = stamp
        self._scan_time = time.time_ns()
        names = _listing(self.pack_dir)
        found: dict[str, Path] = {}
        problems: dict[str, str] = {}
        for stem, exts in names.items():
            if ".pack" in exts and ".idx" in exts:
                found[stem] = self.pack_dir / f"{stem}.pack"
            elif ".pack" in exts and self._repair_orphan(self.pack_dir / f"{stem}.pack"):
                found[stem] = self.pack_dir / f"{stem}.pack"
            elif ".pack" in exts:
                problems[f"{stem}.pack"] = NO_INDEX
            else:
                problems[f"{stem}.idx"] = "index has no pack"
        with self._open_guard:
            changed = False
            for stem in list(self._packs):
                if stem not in found:
                    # Dropped, not closed: a caller may still hold it; its map goes with the last reference.
                    del self._packs[stem]
                    changed = True
            ages = self._ages
            for stem, path in found.items():
                if stem not in ages:
                    try:
                        ages[stem] = path.stat().st_mtime_ns
                    except FileNotFoundError:
                        ages[stem] = 0  # gone since the listing: opening it fails and says so
                    changed = True
            for stem in [s for s in ages if s not in found]:
                del ages[stem]
            self._pending = {stem: path for stem, path in found.items() if stem not in self._packs}
            self._order = sorted(found, key=lambda stem: (-ages[stem], stem))
            # A pack that failed to open stays named (and is tried again when a lookup next reaches it).
            self._failed = {stem: why for stem, why in self._failed.items() if stem in found}
            self.problems = problems | {f"{stem}.pack": why for stem, why in self._failed.items()}
        return changed

    def opened(self, since_ns: int = 0) -> Iterator[Pack]:
        """The usable packs, newest first, each opened when reached (an unusable one is named in
        `problems()` and skipped); with `since_ns`, only those whose file is at least that recent."""
        if self._scanned is None:
            self.refresh()
        packs, pending, ages = self._packs, self._pending, self._ages
        for stem in self._order:
            if ages.get(stem, 0) < since_ns:
                break
            pack = packs.get(stem)
            if pack is None and stem in pending:
                pack = self._open_listed(stem)
            if pack is not None:
                yield pack

    def _open_listed(self, stem: str) -> Pack | None:
        with self._open_guard:  # one thread opens a pack; another waits for it rather than skip it
            pack = self._packs.get(stem)
            path = self._pending.pop(stem, None)
            if pack is not None or path is None:
                return pack
            try:
                pack = self._packs[stem] = self._open_pack(path)
            except StorageError as err:
                why = err.message.split(": ", 1)[-1]
            except OSError as exc:
                why = str(exc)
            else:
                self._failed.pop(stem, None)
                self.problems.pop(f"{stem}.pack", None)
                return pack
            self._failed[stem] = self.problems[f"{stem}.pack"] = why
            return None

    def _repair_orphan(self, pack_path: Path) -> bool:
        """Give a pack its index back if its writer was killed between renaming the pack and the index."""
        from reelstore.backend.packs.batch import orphaned_by_dead, rebuild_index

        leftovers = orphaned_by_dead(pack_path)
        if not leftovers or not rebuild_index(pack_path, fsync=self.fsync):
            return False
        for tmp in leftovers:
            tmp.unlink(missing_ok=True)
        return True

    def _open_pack(self, path: Path) -> Pack:
        """A pack whose index is torn (a crash after the pack was made durable, before its unsynced index
        reached the disk: short, or with a zeroed page) gets it rebuilt from the pack. An index of the
        right size with wrong bytes is damage, left for fsck to report."""
        try:
            return Pack(path)
        except StorageError:
            from reelstore.backend.packs.batch import rebuild_index, torn_index

            if not torn_index(path) or not rebuild_index(path, fsync=self.fsync):
                raise
            return Pack(path)

    def racy(self) -> bool:
        """Whether a change since the last scan may have left the pack directory's stamp as it was: the
        stamp moves a clock tick at a time, so a pack (or its index) renamed in just after a scan made
        in the same tick as the directory's last change goes unseen. A miss then rescans whatever the
        stamp says (git's racy-git rule)."""
        return self._scanned is None or self._scan_time - self._scanned < RACY_NS


def pack_count(pack_dir: Path) -> int:
    """How many packs the directory holds, without opening any."""
    return sum(".pack" in exts for exts in _listing(pack_dir).values())


def _listing(pack_dir: Path) -> dict[str, set[str]]:
    """pack-<x> stem -> the extensions present, ignoring temporary files."""
    out: dict[str, set[str]] = {}
    try:
        entries = os.listdir(pack_dir)
    except FileNotFoundError:
        return out
    for name in entries:
        if name.startswith(".") or not name.startswith("pack-"):
            continue
        stem, dot, ext = name.rpartition(".")
        if dot and f".{ext}" in (".pack", ".idx"):
            out.setdefault(stem, set()).add(f".{ext}")
    return out
