"""fsck: damage, missing objects and broken hash chains are named and exit 3; a sound store is clean."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from reelstore.backend.repo import Repo
from reelstore.errors import StorageError
from reelstore.maintenance.fsck import fsck
from reelstore.objects import Blob, Effect, Journal, Record, Tree


def test_clean_store_and_unreachable_listing(tmp_path: Path, run) -> None:
    repo = Repo.init(tmp_path)
    junk = Blob(b"dangling")
    repo.objects.put(junk)
    report = fsck(repo)
    assert report.clean and report.unreachable == [junk.id]
    res = run("fsck", "--unreachable")
    assert res.exit_code == 0 and f"unreachable blob {junk.id.hex()}" in res.output


def test_damaged_loose_object_is_named(tmp_path: Path, reel) -> None:
    repo = Repo.init(tmp_path)
    root = repo.refs["refs/heads/main"]
    path = repo.objects.loose.path(root)
    os.chmod(path, 0o644)
    data = bytearray(path.read_bytes())
    data[-3] ^= 0x01
    path.write_bytes(bytes(data))
    res = reel("fsck")
    assert res.returncode == 3 and root.hex().encode() in res.stdout


def test_missing_object_and_broken_chain(tmp_path: Path, run) -> None:
    repo = Repo.init(tmp_path)
    trunk = repo.refs["refs/heads/main"]
    ghost = Blob(b"never stored")
    tree = Tree(0, (("g", ghost.id),))
    rec = Record(trunk, tree.id, message="points at a ghost")
    repo.objects.put_many([tree, rec])
    repo.refs.set("refs/heads/main", rec.id, trunk)
    report = fsck(repo)
    assert ghost.id in report.missing and not report.clean
    res = run("fsck")
    assert res.exit_code == 3 and f"missing {ghost.id.hex()}" in res.output
    repo.objects.put(ghost)
    assert fsck(repo).clean
    # A record whose parent is not a record, and a journal whose prev is not a journal.
    blob = Blob(b"not a record")
    bad = Record(blob.id, tree.id, message="parent is a blob")
    effect = Effect("http", "C", "https://example.invalid/x", {"method": "POST"})
    entry = Journal(blob.id, "main", rec.id, 0, effect.id, "op-1", "unknown", 1, 5)
    repo.objects.put_many([blob, bad, effect, entry])
    repo.refs.set("refs/views/bad", bad.id, None)
    repo.refs.set("refs/drains/main", entry.id, None)
    problems = fsck(repo).problems
    assert any(f"{bad.id.hex()}.parent is a blob" in p for p in problems)
    assert any(f"{entry.id.hex()}.prev is a blob" in p for p in problems)


def test_a_drain_ref_naming_an_entry_outside_the_segment_is_a_lost_entry(repo: Repo) -> None:
    """On disk the journal lives in its trunk's segment: a drain ref naming an entry stored anywhere else
    (a loose object, as no writer ever leaves one) is a lost entry, E007, never a journal to read."""
    from reelstore.drain import journal as drainlog

    effect = Effect("http", "C", "https://example.invalid/x", {"method": "POST"})
    entry = Journal(None, "main", repo.refs["refs/heads/main"], 0, effect.id, "op-1", "unknown", 1, 5)
    repo.objects.put_many([effect, entry])
    repo.refs.set("refs/drains/main", entry.id, None)
    with pytest.raises(StorageError, match="lost entries") as caught:
        drainlog.head_of(repo, "main")
    assert caught.value.code == "E007"
    assert any("lost entries" in p for p in fsck(repo).problems)


def test_a_damaged_journal_segment_makes_the_report_unclean(repo: Repo) -> None:
    """The backend's own check covers every journal segment, a trunk's or not: damage there is in
    `fsck()`'s problems (the Python API), not only in what `reel fsck` prints."""
    effect = Effect("http", "C", "https://example.invalid/x", {"method": "POST"})
    entry = Journal(None, "gone", repo.refs["refs/heads/main"], 0, effect.id, "op-1", "unknown", 1, 5)
    repo.objects.put(effect)
    seg = repo.objects.segment("gone")
    assert seg is not None
    seg.append([entry.encode()])
    assert not any(seg.path.name in p for p in fsck(Repo.open(repo.path)).problems)
    data = bytearray(seg.path.read_bytes())
    data[-3] ^= 0x20
    seg.path.write_bytes(bytes(data))
    report = fsck(Repo.open(repo.path))
    assert not report.clean and any(seg.path.name in p for p in report.problems), report.problems


def test_memory_store_fsck() -> None:
    mem = Repo.memory()
    assert fsck(mem).clean
