"""gc, prune and repack: exactly the unreachable and old objects go; the grace period survives packing."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reelstore.backend.packs.pack_item import PackItem, PackOptions
from reelstore.backend.packs.pack_verify import verify_pack
from reelstore.backend.repo import Repo
from reelstore.errors import BadInput, Conflict, StorageError
from reelstore.maintenance.age import parse_age
from reelstore.maintenance.fsck import fsck
from reelstore.maintenance.gc import gc
from reelstore.maintenance.lock import gc_lock
from reelstore.maintenance.prune import prune
from reelstore.maintenance.repack import repack
from reelstore.objects import Blob, Effect, Effects, Hash, Record, Tree, View


def view_objects(tag: str, base: Hash, also: Hash) -> tuple[View, list]:
    """A view with a namespace and one pending effect: what an aborted view leaves behind."""
    blobs = [Blob(f"{tag} payload {i}".encode()) for i in range(3)]
    tree = Tree(0, tuple((f"{tag}/{i}", b.id) for i, b in enumerate(blobs)) + (("~shared", also),))
    effect = Effect("http", "C", f"https://example.invalid/{tag}", {"method": "POST"})
    effects = Effects((effect.id,))
    view = View(parent="main", base=base, namespace=tree.id, effects=effects.id)
    return view, [*blobs, tree, effect, effects, view]


def test_gc_after_deleting_a_ref_removes_exactly_what_only_it_reached(repo: Repo) -> None:
    trunk = repo.refs["refs/heads/main"]
    shared = Blob(b"shared by trunk and view")
    tree = Tree(0, (("a", shared.id),))
    rec = Record(trunk, tree.id, author="t", message="two", time=1)
    repo.objects.put_many([shared, tree, rec])
    repo.refs.set("refs/heads/main", rec.id, trunk)
    view, objs = view_objects("v", rec.id, shared.id)
    repo.objects.put_many(objs)
    repo.refs.set("refs/views/v", view.id, None)
    before = set(repo.objects)
    first = gc(repo, "now")
    assert first.pruned == 0 and set(repo.objects) == before
    repo.refs.delete("refs/views/v")
    report = gc(repo, "now")
    assert set(report.pruned_ids) == {o.id for o in objs}
    assert set(repo.objects) == before - set(report.pruned_ids)
    assert repo.objects.get(shared.id) == shared
    again = Repo.open(repo.path)
    assert len(again.objects.packs()) == 1 and not list(again.objects.loose)
    result = fsck(again)
    assert result.clean and result.unreachable == []


def test_grace_period_keeps_young_garbage_and_survives_packing(repo: Repo) -> None:
    junk = Blob(b"unreachable but young")
    repo.objects.put(junk)
    report = gc(repo)
    assert report.kept_recent == 1 and report.pruned == 0
    assert not repo.objects.loose.has(junk.id) and repo.objects.has(junk.id)
    packed_mtime = repo.objects.mtime(junk.id)
    assert abs(packed_mtime - time.time()) < 60
    assert gc(repo, now=time.time() + 10 * 86400).pruned == 0
    later = gc(repo, now=time.time() + 15 * 86400)
    assert later.pruned_ids == [junk.id] and not repo.objects.has(junk.id)


def test_dry_run_deletes_nothing(repo: Repo) -> None:
    junk = Blob(b"junk")
    repo.objects.put(junk)
    before = set(repo.objects)
    report = gc(repo, "now", dry_run=True)
    assert report.pruned_ids == [junk.id] and set(repo.objects) == before
    assert list(repo.objects.loose)


def test_reflog_entries_are_roots_until_they_expire(repo: Repo) -> None:
    trunk = repo.refs["refs/heads/main"]
    old = Record(trunk, Tree(0, ()).id, message="superseded", time=2)
    new = Record(trunk, Tree(0, ()).id, message="current", time=3)
    repo.objects.put_many([old, new])
    repo.refs.set("refs/heads/main", old.id, trunk)
    repo.refs.set("refs/heads/main", new.id, old.id)
    gc(repo, "now")
    assert repo.objects.has(old.id)
    repo.config.set("gc.reflogExpire", "now")
    gc(repo, "now", now=time.time() + 5)
    assert not repo.objects.has(old.id) and repo.objects.has(new.id) and repo.objects.has(trunk)


def test_gc_refuses_when_a_reachable_object_is_missing(repo: Repo) -> None:
    ghost = Blob(b"never stored")
    rec = Record(repo.refs["refs/heads/main"], Tree(0, (("g", ghost.id),)).id)
    repo.objects.put_many([Tree(0, (("g", ghost.id),)), rec])
    repo.refs.set("refs/heads/main", rec.id)
    junk = Blob(b"would be pruned")
    repo.objects.put(junk)
    with pytest.raises(StorageError, match="incomplete"):
        gc(repo, "now")
    assert repo.objects.has(junk.id)


def test_second_gc_fails_clearly_and_stale_lock_is_taken_over(repo: Repo) -> None:
    with gc_lock(repo):
        with pytest.raises(Conflict, match="another gc is running"):
            gc(repo, "now")
    lock = repo.path / "gc.lock"
    dead = os.fork()
    if dead == 0:
        os._exit(0)
    os.waitpid(dead, 0)
    lock.write_text(f"{dead} {socket.gethostname()} 0\n")
    assert gc(repo, "now").reachable > 0
    assert not lock.exists()


def test_prune_touches_loose_only_and_repack_merges(repo: Repo) -> None:
    a, b = Blob(b"loose junk a"), Blob(b"loose junk b")
    repo.objects.put(a)
    gc(repo, "never")
    repo.objects.put(b)
    assert prune(repo, "now", dry_run=True).removed == [b.id] and repo.objects.has(b.id)
    assert prune(repo, "now").removed == [b.id]
    assert not repo.objects.has(b.id) and repo.objects.has(a.id)
    repo.objects.put(Blob(b"c"))
    repack(repo)
    assert len(repo.objects.packs()) == 2
    report = repack(repo, all_objects=True, delete=True)
    assert report.packs_removed == 2 and len(repo.objects.packs()) == 1 and repo.objects.has(a.id)
    assert fsck(repo).clean


def test_memory_store_gc() -> None:
    mem = Repo.memory()
    junk = Blob(b"junk")
    mem.objects.put(junk)
    report = gc(mem, "now")
    assert report.pruned_ids == [junk.id] and not mem.objects.has(junk.id)
    assert mem.objects.has(mem.refs["refs/heads/main"])


def test_memory_store_gc_keeps_the_young_unreachable_as_the_disk_store_does() -> None:
    """The grace period holds in every backend: an unreachable object written just now stays under the
    default expiry, and goes once it is older than the cutoff."""
    mem = Repo.memory()
    junk = Blob(b"young junk")
    mem.objects.put(junk)
    report = gc(mem)
    assert report.kept_recent == 1 and report.pruned == 0 and mem.objects.has(junk.id)
    later = gc(mem, now=time.time() + 15 * 86400)
    assert later.pruned_ids == [junk.id] and not mem.objects.has(junk.id)


@pytest.mark.parametrize(
    "text,delta",
    [
        ("now", 0),
        ("2.weeks.ago", 14 * 86400),
        ("30.minutes", 1800),
        ("1h", 3600),
        ("90 days ago", 90 * 86400),
        ("3.months.ago", 90 * 86400),
        ("10s", 10),
    ],
)
def test_parse_age(text: str, delta: int) -> None:
    assert parse_age(text, now=1_000_000_000) == 1_000_000_000 - delta


def test_parse_age_iso_never_and_bad() -> None:
    assert parse_age("never") is None
    assert parse_age("2020-01-01T00:00:00Z") == 1577836800
    assert parse_age("2020-01-01") == 1577836800
    with pytest.raises(BadInput):
        parse_age("last tuesday")


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    edges=st.lists(st.lists(st.integers(0, 29), max_size=4), min_size=30, max_size=30),
    refs=st.lists(st.integers(0, 29), max_size=5),
    packed=st.booleans(),
)
def test_gc_keeps_exactly_the_reachable_set(tmp_path_factory, edges, refs, packed) -> None:
    repo = Repo.init(tmp_path_factory.mktemp("g"))
    repo.objects.fsync = repo.objects.loose.fsync = False
    nodes: list = []
    for i in range(30):
        kids = sorted({nodes[j].id for j in edges[i] if j < i})
        nodes.append(Tree(0, tuple((f"n{k}", h) for k, h in enumerate(kids))) if kids else Blob(b"leaf %d" % i))
    if packed:
        repo.objects.put_many(nodes[:15])
        gc(repo, "never")
        repo.objects.put_many(nodes[15:])
    else:
        repo.objects.put_many(nodes)
    for n, i in enumerate(refs):
        repo.refs.set(f"refs/views/r{n}", nodes[i].id, None)
    expected = {repo.refs["refs/heads/main"], Tree(0, ()).id}
    stack = [nodes[i].id for i in refs]
    by_id = {n.id: n for n in nodes}
    while stack:
        h = stack.pop()
        if h not in expected:
            expected.add(h)
            stack.extend(by_id[h].references())
    gc(repo, "now")
    assert set(Repo.open(repo.path).objects) == expected


def test_tree_hint_names_reach_the_pack(tmp_path: Path) -> None:
    repo = Repo.init(tmp_path)
    rec = repo.refs["refs/heads/main"]
    for v in range(5):
        blob = Blob(("line\n" * 200 + f"version {v}\n").encode())
        tree = Tree(0, (("doc.txt", blob.id),))
        new = Record(rec, tree.id, time=v)
        repo.objects.put_many([blob, tree, new])
        repo.refs.set("refs/heads/main", new.id, rec)
        rec = new.id
    gc(repo, "now")
    infos, problems = verify_pack(repo.objects.packs()[0])
    assert problems == [] and any(i.method == "base" and i.kind == "blob" for i in infos)


def test_gc_sweeps_temp_files_left_by_a_killed_writer(repo: Repo) -> None:
    pack_dir = repo.path / "objects" / "pack"
    old = pack_dir / ".tmp-pack.pack-123-abcd"
    young = pack_dir / ".tmp-pack.pack-456-ef01"
    shard = repo.path / "objects" / "ab"
    shard.mkdir(exist_ok=True)
    old_loose = shard / (".tmp-" + "c" * 62 + "-123-abcd")
    for p in (old, young, old_loose):
        p.write_bytes(b"partial")
    long_ago = time.time() - 7200
    os.utime(old, (long_ago, long_ago))
    os.utime(old_loose, (long_ago, long_ago))
    assert gc(repo, "now").temp_removed == 2
    assert not old.exists() and not old_loose.exists() and young.exists()


def test_damaged_unreachable_young_object_does_not_block_gc(repo: Repo) -> None:
    junk, other = Blob(b"young junk, soon damaged"), Blob(b"young junk, sound")
    repo.objects.put_many([junk, other])
    path = repo.objects.loose.path(junk.id)
    os.chmod(path, 0o644)
    data = bytearray(path.read_bytes())
    data[-2] ^= 0x10
    path.write_bytes(bytes(data))
    report = gc(repo)
    assert report.damaged_skipped == [junk.id] and path.exists()
    assert repo.objects.get(other.id) == other
    assert not fsck(repo).clean


def test_gc_sweeps_a_staging_directory_left_by_a_killed_fetch(repo: Repo) -> None:
    objects = repo.path / "objects"
    old, young = objects / ".tmp-fetch-old", objects / ".tmp-fetch-young"
    for d in (old, young):
        (d / "full" / "ab").mkdir(parents=True)
        (d / "full" / "ab" / ("c" * 62)).write_bytes(b"staged")
    long_ago = time.time() - 7200
    os.utime(old, (long_ago, long_ago))
    assert gc(repo, "now").temp_removed == 1
    assert not old.exists() and young.exists()


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    where=st.lists(st.tuples(st.booleans(), st.booleans(), st.booleans()), min_size=24, max_size=24),
    ages=st.lists(st.tuples(st.booleans(), st.booleans(), st.booleans()), min_size=24, max_size=24),
    reached=st.lists(st.booleans(), min_size=24, max_size=24),
)
def test_objects_held_twice_are_decided_once_by_their_newest_copy(tmp_path_factory, where, ages, reached) -> None:
    """An object in two packs and/or loose is one candidate: kept if reachable or if any copy is younger
    than the cutoff, and packed once, with its newest mtime."""
    repo = Repo.init(tmp_path_factory.mktemp("t"))
    repo.objects.fsync = repo.objects.loose.fsync = False
    now = time.time()
    old, young, cutoff = int(now) - 30 * 86400, int(now) - 3600, now - 86400
    blobs = [Blob(b"held twice %d" % i) for i in range(24)]
    copies = [w if any(w) else (True, False, False) for w in where]
    for k in range(2):
        items = [PackItem(b.id, b.encode(), young if a[k] else old) for b, w, a in zip(blobs, copies, ages) if w[k]]
        if items:
            repo.objects.add_pack(items, PackOptions())
    for b, w, a in zip(blobs, copies, ages):
        if w[2]:
            repo.objects.loose.put_many([b])
            stamp = young if a[2] else old
            os.utime(repo.objects.loose_path(b.id), (stamp, stamp))
    keep = [b for b, r in zip(blobs, reached) if r]
    point = Tree(0, tuple((f"k{i:02}", b.id) for i, b in enumerate(keep)))
    rec = Record(repo.refs["refs/heads/main"], point.id, message="keep", time=1)
    repo.objects.put_many([point, rec])
    repo.refs.set("refs/heads/main", rec.id)
    newest = [max((young if a[k] else old) for k in range(3) if w[k]) for w, a in zip(copies, ages)]
    expected = {b.id for b, r, t in zip(blobs, reached, newest) if r or t >= cutoff}
    report = gc(repo, "1.day.ago", now=now)
    after = Repo.open(repo.path).objects
    held = set(after)
    assert {b.id for b in blobs} & held == expected
    assert report.pruned == len(set(report.pruned_ids)) == 24 - len(expected)
    assert report.kept_recent == len(expected - {b.id for b in keep})
    assert report.candidates == len(set(after) | set(report.pruned_ids))
    for b in blobs:
        if b.id in expected:
            assert after.get_raw(b.id) == b.encode()
            assert after.mtime(b.id) == pytest.approx(newest[blobs.index(b)], abs=1)


def test_the_disk_gc_reads_the_pack_options_from_the_store_config(repo: Repo) -> None:
    """gc packs with the store's `pack.*` options, read from its config when it runs: a value that is
    not an integer is E014 naming the key, before any pack is written; repack reads them too."""
    repo.objects.put(Blob(b"kept loose, then packed"))
    repo.config.set("pack.depth", "deep")
    with pytest.raises(BadInput, match="pack.depth"):
        gc(repo, "now")
    with pytest.raises(BadInput, match="pack.depth"):
        repack(repo)
    repo.config.set("pack.depth", "0")
    assert gc(repo, "now").pack is not None and len(repo.objects.packs()) == 1
