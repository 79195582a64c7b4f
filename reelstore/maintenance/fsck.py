"""fsck: the backend checks what it holds (every object re-hashed and decoded; on disk, every pack and
journal segment too); then every ref and reflog line is read (each checksummed), the walk goes from
every ref and reflog, and the hash chains, each ref target's kind and which records each trunk owes
drains for are checked.

Damage is named (which file, which object, what is wrong); the caller decides how to exit. Reflog
entries older than `gc.reflogExpire` are not walked: gc may legitimately have collected what they named.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from reelstore.backend import binding_log
from reelstore.backend.object_store import ObjectStore
from reelstore.backend.repo import Repo
from reelstore.drain import owners
from reelstore.drain.ops import ownership
from reelstore.errors import BadInput, NotFound, StorageError
from reelstore.maintenance.age import DEFAULT_REFLOG_EXPIRE, config_cutoff
from reelstore.maintenance.reach import walk
from reelstore.objects import Approval, Effect, Effects, Hash, Journal, Object, Record, View
from reelstore.objects.approval import fault
from reelstore.objects.ref import required_kind


@dataclass
class FsckReport:
    objects: int = 0
    loose: int = 0
    packs: int = 0
    packed: int = 0
    reachable: int = 0
    refs: int = 0
    problems: list[str] = field(default_factory=list)
    missing: dict[Hash, str] = field(default_factory=dict)
    unreachable: list[Hash] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not self.problems and not self.missing

    def to_json(self) -> dict[str, Any]:
        return {
            "objects": self.objects,
            "loose": self.loose,
            "packs": self.packs,
            "packed": self.packed,
            "reachable": self.reachable,
            "refs": self.refs,
            "problems": self.problems,
            "missing": {h.hex(): via for h, via in self.missing.items()},
            "unreachable": [h.hex() for h in self.unreachable],
            "clean": self.clean,
        }


def _chain_links(obj: Object) -> list[tuple[str, Hash, tuple[str, ...]]]:
    """(field, target, kinds the target may be) for the links that form hash chains."""
    if isinstance(obj, Record):
        maybe: list[tuple[str, Hash | None, tuple[str, ...]]] = [
            ("parent", obj.parent, ("record",)),
            ("namespace", obj.namespace, ("tree",)),
            ("effects", obj.effects, ("effects",)),
        ]
        return [(f, h, k) for f, h, k in maybe if h is not None]
    if isinstance(obj, Journal):
        links: list[tuple[str, Hash, tuple[str, ...]]] = [
            ("record", obj.record, ("record",)),
            ("effect", obj.effect, ("effect",)),
        ]
        if obj.prev is not None:
            links.append(("prev", obj.prev, ("journal",)))
        return links
    if isinstance(obj, View):
        base = [("base", obj.base, ("record", "view"))] if obj.base is not None else []
        return base + [("approvals", h, ("approval",)) for h in obj.approvals]
    return []


def fsck(
    repo: Repo, *, full: bool = True, progress: Callable[[str, int, int | None], None] | None = None
) -> FsckReport:
    report = FsckReport()
    store = repo.objects
    held = store.fsck(full=full, progress=progress)
    every = held.ids
    report.problems.extend(held.problems)
    report.loose, report.packs, report.packed, report.objects = held.loose, held.packs, held.packed, len(every)
    now = time.time()
    since = config_cutoff(repo, "gc.reflogExpire", DEFAULT_REFLOG_EXPIRE, now)
    roots, heads = _ref_roots(repo, report, 0 if since is None else int(since * 1000))
    links: list[tuple[Hash, str, Hash, tuple[str, ...]]] = []
    committed: list[tuple[Hash, Hash]] = []

    def seen(obj: Object) -> None:
        for name, target, kinds in _chain_links(obj):
            links.append((obj.id, name, target, kinds))
        if isinstance(obj, Record) and obj.view is not None:
            committed.append((obj.id, obj.view))

    tick = (lambda n: progress("walking", n, None)) if progress else None
    w = walk(store, roots, progress=tick, on_object=seen)
    report.reachable = len(w.reachable)
    report.missing = dict(w.missing)
    for h, via in sorted(w.missing.items()):
        report.problems.append(f"missing {h.hex()} (referenced by {via})")
    for h, msg in sorted(w.damaged.items()):
        line = f"damaged {h.hex()}: {msg}"
        if not any(h.hex() in p for p in report.problems):
            report.problems.append(line)
    for src, name, target, kinds in links:
        kind = w.kinds.get(target)
        if kind is not None and kind not in kinds:
            report.problems.append(f"broken chain: {src.hex()}.{name} is a {kind}, not a {' or '.join(kinds)}")
    for name, target in heads:
        kind = w.kinds.get(target)
        want = required_kind(name)
        if kind is not None and want is not None and kind != want:
            report.problems.append(f"ref {name} points at a {kind} ({target.hex()}), not a {want}")
    _check_ownership(repo, report, heads)
    _check_approvals(store, report, committed)
    _check_operations(repo, report)
    report.problems.extend(binding_log.missing(repo.files))
    report.unreachable = sorted(every - w.reachable - set(w.damaged))
    return report


def _ref_roots(repo: Repo, report: FsckReport, since_ms: int) -> tuple[list[tuple[str, Hash]], list[tuple[str, Hash]]]:
    """(walk roots, every ref's value) from what reads soundly; each damaged ref or reflog
    is a problem naming it, and the check goes on with the rest."""
    refs = repo.refs
    names = list(refs.names())
    roots: list[tuple[str, Hash]] = []
    heads: list[tuple[str, Hash]] = []
    for name in names:
        try:
            value = refs.get(name)
        except StorageError as err:
            report.problems.append(err.message)
            value = None
        if value is not None:
            heads.append((name, value))
            roots.append((name, value))
        try:
            log = refs.reflog(name)
        except StorageError as err:
            report.problems.append(err.message)
            continue
        for n, entry in enumerate(log):
            if entry.time_ms >= since_ms:
                roots += [(f"{name}@{{{n}}}", h) for h in (entry.old, entry.new) if h is not None]
    report.refs = len(heads)
    return roots, heads


def _check_ownership(repo: Repo, report: FsckReport, heads: list[tuple[str, Hash]]) -> None:
    """The records each trunk owes, cross-checked between its reflog and its drain journal."""
    for name, _ in heads:
        if not name.startswith("refs/heads/"):
            continue
        trunk = name[len("refs/heads/") :]
        try:
            mismatches = ownership(repo, trunk).mismatches
        except StorageError as err:
            if err.message not in report.problems:
                report.problems.append(f"trunk {trunk}: {err.message}")
            continue
        report.problems.extend(f"trunk {trunk}: {m}" for m in mismatches)


def _check_operations(repo: Repo, report: FsckReport) -> None:
    """Rebuild the index of committed operation ids from the trunks' records, and report an operation
    that a record carries although the very view that queued it was aborted (its tombstone says so)."""
    try:
        owners.rebuild(repo)
        for (op, _effect, fork), (view, view_object) in sorted(owners.tombstoned_effects(repo).items()):
            held = owners.owner(repo, op)
            if held is None or held.record is None or held.fate != "committed":
                continue
            rec = repo.cache.load(held.record, Record)
            if rec.view is not None and str(repo.cache.load(rec.view, View).meta.get("fork", "")) == fork:
                report.problems.append(
                    f"operation {op} of aborted view {view!r} ({view_object.hex()}) was "
                    f"committed in record {held.record.hex()}"
                )
    except (StorageError, NotFound) as err:
        report.problems.append(f"operations index: {err.message}")


def _check_approvals(store: ObjectStore, report: FsckReport, committed: list[tuple[Hash, Hash]]) -> None:
    """Every approval a committed view lists must approve exactly what its record fired, by a principal
    other than the view's initiator and the effects' queuers: the commit kept only such approvals."""
    for record, view_id in committed:
        try:
            view = store.get_as(view_id, View)
            if not view.approvals:
                continue
            effects = store.get_as(view.effects, Effects).items if view.effects is not None else ()
            queued_by = [store.get_as(h, Effect).principal for h in effects]
            for h in view.approvals:
                why = fault(store.get_as(h, Approval), view, queued_by)
                if why is not None:
                    report.problems.append(f"record {record.hex()}: approval {h.hex()} does not hold ({why})")
        except (NotFound, StorageError, BadInput):
            continue  # missing or damaged objects are reported by the walk
