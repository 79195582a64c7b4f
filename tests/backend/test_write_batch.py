"""A small write's objects: a lone new object goes loose (a fork's view), an object already packed is
not written again while no gc runs (a fork's trunk capability), and neither loses an object beside a
concurrent `gc --prune=now`."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from reelstore.backend.repo import Repo
from reelstore.crashpoints import hooked
from reelstore.kernel import admission
from reelstore.kernel import verbs as kernel
from reelstore.maintenance.fsck import fsck
from reelstore.maintenance.gc import gc
from reelstore.maintenance.lock import gc_lock
from reelstore.objects import Capability, View

REEL = [sys.executable, "-c", "from reelstore.cli.main import main; main()"]


def pack_dir(repo: Repo) -> Path:
    return repo.path / "objects" / "pack"  # type: ignore[operator]


def packs(repo: Repo) -> set[str]:
    return {p.name for p in pack_dir(repo).glob("*.pack")}


def loose(repo: Repo) -> set[str]:
    root = repo.path / "objects"  # type: ignore[operator]
    return {d.name + f.name for d in root.iterdir() if len(d.name) == 2 for f in d.iterdir()}


def trunk_cap(repo: Repo) -> Capability:
    (cap,) = admission.trunk_caps(repo, repo.trunk)
    return cap


def test_a_fork_writes_its_view_loose_and_leaves_the_packed_capability_as_it_is(repo: Repo) -> None:
    kernel.fork(repo, "first")  # the trunk's capability is new: it and the view, one pack
    assert len(packs(repo)) == 1
    cap = trunk_cap(repo)
    before_packs, before_loose = packs(repo), loose(repo)
    live = kernel.fork(Repo.open(repo.path), "second")  # type: ignore[arg-type]
    assert packs(repo) == before_packs
    assert loose(repo) - before_loose == {live.view.id.hex()}
    fresh = Repo.open(repo.path)  # type: ignore[arg-type]
    assert fresh.objects.get_as(live.view.id, View).caps == (cap.id,)
    assert fresh.objects.get_as(cap.id, Capability) == cap
    assert fsck(fresh).clean


def test_a_capability_whose_only_copy_is_old_is_freshened(repo: Repo) -> None:
    """An old copy may be gc's to delete on a host that cannot see this one's registrations (its grace
    period is measured from the copy's mtime), so it is freshened: a loose one by its mtime alone."""
    cap = trunk_cap(repo)
    repo.objects.loose.put_many([cap])
    path = repo.objects.loose_path(cap.id)  # type: ignore[attr-defined]
    old = time.time() - 2 * 86400
    os.utime(path, (old, old))
    before_packs, before_loose = packs(repo), loose(repo)
    live = kernel.fork(Repo.open(repo.path), "v")  # type: ignore[arg-type]
    assert os.stat(path).st_mtime > old + 86400
    assert packs(repo) == before_packs and loose(repo) - before_loose == {live.view.id.hex()}


def test_while_gc_holds_its_lock_a_fork_writes_the_capability_again(repo: Repo) -> None:
    """A running gc may have listed the capability's pack as a candidate before the fork registered it:
    the copy the new view names must then be one gc does not delete, so it is written again."""
    kernel.fork(repo, "first")
    before = packs(repo)
    with gc_lock(repo):
        live = kernel.fork(Repo.open(repo.path), "second")  # type: ignore[arg-type]
    (new,) = packs(repo) - before
    fresh = Repo.open(repo.path)  # type: ignore[arg-type]
    written = {
        h
        for p in fresh.objects.packs()
        if p.name == new.removesuffix(".pack")  # type: ignore[attr-defined]
        for h in p.ids()
    }
    assert written == {live.view.id, trunk_cap(repo).id}


def test_a_lone_object_whose_shard_is_missing_goes_into_a_pack(repo: Repo) -> None:
    """A loose object in a new shard directory costs a third fsync (the new directory's parent); a pack
    costs two, so it is a pack. A store made by `reel init` has all 256 shards."""
    kernel.fork(repo, "first")
    root = repo.path / "objects"  # type: ignore[operator]
    assert sum(1 for d in root.iterdir() if len(d.name) == 2) == 256
    gc(repo)  # every object packed, so every shard is empty
    for d in root.iterdir():
        if len(d.name) == 2:
            d.rmdir()
    before_packs, before_loose = packs(repo), loose(repo)
    live = kernel.fork(Repo.open(repo.path), "second")  # type: ignore[arg-type]
    assert len(packs(repo) - before_packs) == 1 and loose(repo) == before_loose
    assert Repo.open(repo.path).objects.get_as(live.view.id, View) == live.view  # type: ignore[arg-type]


def test_a_capability_left_unreachable_survives_a_gc_prune_now_run_beside_the_fork(tmp_path: Path) -> None:
    """The race the skipped write must not lose: the capability's only view was aborted, so it is
    unreachable, and a `gc --prune=now` (another process) runs after the fork decided not to write it
    again, while the new view's file is written but not yet in place (so gc cannot reach the capability
    through the view). gc's fence reads the fork's in-flight registration of the capability and keeps it."""
    repo = Repo.init(tmp_path)
    kernel.fork(repo, "old")
    kernel.abort(repo, "old")
    cap = trunk_cap(repo)
    ran: list[subprocess.CompletedProcess[bytes]] = []

    def gc_now(point: str) -> None:
        if point == "objects:temp-written" and not ran:
            env = {k: v for k, v in os.environ.items() if k != "REEL_TEST_CRASH_AT"}
            ran.append(
                subprocess.run([*REEL, "gc", "--prune=now"], cwd=tmp_path, env=env, capture_output=True, timeout=120)
            )

    forking = Repo.open(tmp_path)
    before = packs(forking)
    with hooked(gc_now):
        live = kernel.fork(forking, "new")
    assert ran and ran[0].returncode == 0, ran[0].stderr.decode()
    assert packs(forking) != before  # gc did run: it rewrote the packs
    fresh = Repo.open(tmp_path)
    assert fresh.objects.get_as(live.view.caps[0], Capability) == cap
    assert fsck(fresh).clean


def test_a_fork_killed_around_its_loose_view_leaves_no_view_and_forks_again(tmp_path: Path) -> None:
    """SIGKILL with the view's temporary file written, or with the file in place before the ref is
    written: no view, fsck clean, and the same fork then succeeds."""
    repo = Repo.init(tmp_path)
    kernel.fork(repo, "first")
    env = {k: v for k, v in os.environ.items() if k not in ("REEL_DIR", "REEL_TEST_CRASH_AT")}
    for point in ("objects:temp-written", "refs:prepared"):
        killed = subprocess.run(
            [*REEL, "fork", "second"],
            cwd=tmp_path,
            env={**env, "REEL_TEST_CRASH_AT": point},
            capture_output=True,
            timeout=120,
        )
        assert killed.returncode == -9, killed.stderr.decode()
        fresh = Repo.open(tmp_path)
        assert fresh.refs.get("refs/views/second") is None
        assert fsck(fresh).clean
        cleared = subprocess.run(
            [*REEL, "gc", "--clear-stale-locks"], cwd=tmp_path, env=env, capture_output=True, timeout=120
        )  # the lock a writer killed mid-transaction leaves
        assert cleared.returncode == 0, cleared.stderr.decode()
    again = subprocess.run([*REEL, "fork", "second"], cwd=tmp_path, env=env, capture_output=True, timeout=120)
    assert again.returncode == 0, again.stderr.decode()
    fresh = Repo.open(tmp_path)
    view = fresh.objects.get_as(fresh.refs["refs/views/second"], View)
    assert view.caps == (trunk_cap(fresh).id,) and fsck(fresh).clean


def test_a_large_batch_finds_the_loose_copies_among_its_objects_and_only_freshens_them(repo: Repo) -> None:
    """From LIST_LOOSE_AT objects a batch lists the shards once instead of a lookup per object: those
    already loose are freshened, not packed; the rest go into the one new pack."""
    from reelstore.backend.disk_store import LIST_LOOSE_AT
    from reelstore.objects import Blob

    old = [Blob(b"already loose %d" % i) for i in range(5)]
    repo.objects.loose.put_many(old)
    paths = [repo.objects.loose_path(b.id) for b in old]  # type: ignore[attr-defined]
    for path in paths:
        os.utime(path, (1_000_000_000, 1_000_000_000))
    new = [Blob(b"new %d" % i) for i in range(LIST_LOOSE_AT)]
    before = packs(repo)
    with repo.objects.batch():
        repo.objects.put_many(old + new)
    (made,) = packs(repo) - before
    fresh = Repo.open(repo.path)  # type: ignore[arg-type]
    (pack,) = [p for p in fresh.objects.packs() if p.name == made.removesuffix(".pack")]  # type: ignore[attr-defined]
    assert set(pack.ids()) == {b.id for b in new}
    assert all(os.stat(path).st_mtime > 1_000_000_000 for path in paths)
