"""The protocol's promises, one test (or a few) each, numbered t001-t014 in this order: types public,
immutable and hashed; fork isolated; commit atomic; abort silent; effects unreachable after abort and
gc; many random commits and aborts never fire an aborted effect; narrowing never amplifies; Class A
needs no network; stale Class B is E002; fire only from a commit's drain; the effects block decodes,
re-hashes and vanishes after abort and gc; restore is exact for Class A, warns for a moved Class B and
keeps Class C pending. Then crash-atomic commit, concurrent forks atomic and isolated, and
byte-deterministic archives (bundles)."""

from __future__ import annotations

import dataclasses
import os
import random
import signal
import subprocess
import sys
import warnings
from pathlib import Path

import blake3
import kernel_helpers as kh
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import reelstore.backend.refdb.refs as refs
import reelstore.objects as objects
from reelstore.backend.repo import Repo
from reelstore.drain.drainer import FireToken
from reelstore.errors import CapabilityViolation, Conflict, NotFound, ViewTerminal
from reelstore.kernel import snapshot as snapshots
from reelstore.kernel import verbs as kernel
from reelstore.kernel.views import live_views
from reelstore.maintenance import bundle as bundles
from reelstore.maintenance.gc import gc
from reelstore.maintenance.reach import walk as reach_walk
from reelstore.namespace.tree import Namespace
from reelstore.objects import OPS, Blob, Capability, Effects, Hash, Record, View, decode, prefix_covers

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _clean() -> None:
    kh.reset()


def test_t001_types_public_immutable_and_hashed(any_repo: Repo) -> None:
    for name in ("Hash", "Blob", "Delta", "Capability", "View", "Effects", "Record"):
        assert hasattr(objects, name)
    assert callable(refs.RefStore.set) and callable(refs.RefStore.transaction)
    blob = Blob(b"x")
    with pytest.raises(dataclasses.FrozenInstanceError):
        blob.data = b"y"  # type: ignore[misc]
    assert bytes(blob.id) == blake3.blake3(blob.encode()).digest() and len(blob.id) == 32
    kernel.fork(any_repo, "a")
    kernel.effect(any_repo, "a", "recorder", {"n": 1})
    view = any_repo.objects.get(any_repo.refs["refs/views/a"])
    assert isinstance(view, View) and isinstance(view.effects, Hash)
    assert isinstance(any_repo.objects.get(view.effects), Effects)


def test_t002_fork_is_isolated(any_repo: Repo) -> None:
    kernel.fork(any_repo, "parent")
    kernel.fork(any_repo, "child", source="parent")
    kernel.put(any_repo, "child", "x", b"child only")
    with pytest.raises(NotFound):
        kernel.get(any_repo, "parent", "x")
    kernel.fork(any_repo, "sibling", source="parent")
    with pytest.raises(NotFound):
        kernel.get(any_repo, "sibling", "x")


def test_t003_commit_is_atomic(mem: Repo) -> None:
    from reelstore.crashpoints import hooked

    class Crash(Exception):
        pass

    def crash(point: str) -> None:
        if point == "commit:record-written":
            raise Crash(point)

    kernel.fork(mem, "a")
    kernel.put(mem, "a", "x", b"1")
    kernel.effect(mem, "a", "recorder", {"n": 1})
    head = mem.refs["refs/heads/main"]
    with hooked(crash):
        with pytest.raises(Crash):
            kernel.commit(mem, "a")
    assert mem.refs["refs/heads/main"] == head and kh.FIRED == []
    res = kernel.commit(mem, "a")
    assert res.record == mem.refs["refs/heads/main"]
    assert [n for _, n in kh.FIRED] == [1]


def test_t004_abort_silences(tmp_path: Path, repo: Repo) -> None:
    kernel.fork(repo, "a")
    kernel.effect(repo, "a", "fs", {"action": "write", "path": "out/never.txt", "content": "no"})
    kernel.abort(repo, "a")
    assert not (tmp_path / "out" / "never.txt").exists()
    assert repo.refs.get("refs/drains/main") is None


def test_t005_gc_after_drop_makes_effects_unreachable(tmp_path: Path, repo: Repo) -> None:
    kernel.fork(repo, "a")
    made = kernel.effect(repo, "a", "fs", {"action": "write", "path": "x", "content": "c"})
    view_id = repo.refs["refs/views/a"]
    kernel.abort(repo, "a")
    gc(repo, "now")
    for h in (made.id, view_id):
        with pytest.raises(NotFound):
            repo.objects.get(h)
        done = subprocess.run([*_cli(), "cat-file", "-e", h.hex()], cwd=tmp_path, capture_output=True, timeout=60)
        assert done.returncode == 4


def _cli() -> list[str]:
    return [sys.executable, "-c", "from reelstore.cli.main import main; main()"]


def test_t006_ten_thousand_random_commit_abort_iterations_never_fire_an_aborted_effect() -> None:
    for seed in range(10):
        _random_iterations(seed, 1_000)


def _random_iterations(seed: int, count: int) -> None:
    """`count` iterations on a fresh store: fork (from the trunk or a live view), queue an effect, and
    commit or abort a random live view. Afterwards every effect a trunk record lists fired exactly
    once, and no other effect fired."""
    kh.reset()
    mem = Repo.memory()
    rng = random.Random(seed)
    made: set[str] = set()
    live: list[str] = []
    for i in range(count):
        name = f"v{i}"
        parent = rng.choice(live) if live and rng.random() < 0.2 else None
        kernel.fork(mem, name, source=parent)
        live.append(name)
        made.add(kernel.effect(mem, name, "recorder", {"n": i}).id.hex())
        if rng.random() < 0.5 or len(live) > 16:
            victim = live.pop(rng.randrange(len(live)))
            if rng.random() < 0.5:
                for gone in kernel.abort(mem, victim):
                    if gone in live:
                        live.remove(gone)
            else:
                try:
                    kernel.commit(mem, victim)
                except (NotFound, ViewTerminal):
                    pass
    fired = [h for h, _ in kh.FIRED]
    on_trunk = _on_trunk(mem)
    assert len(fired) == len(set(fired)), "an effect fired twice"
    assert set(fired) == on_trunk, "a committed effect did not fire, or an uncommitted one did"
    assert made - on_trunk and not set(fired) & (made - on_trunk)


def _on_trunk(repo: Repo) -> set[str]:
    """Effects trunk records list (never those of aborted views, nor of children merged into them)."""
    on_trunk: set[str] = set()
    h = repo.refs["refs/heads/main"]
    while h is not None:
        rec = repo.objects.get(h)
        assert isinstance(rec, Record)
        if rec.effects is not None:
            on_trunk.update(x.hex() for x in repo.objects.get(rec.effects).items)
        h = rec.parent
    return on_trunk


caps_strategy = st.builds(
    Capability.make,
    st.sets(st.sampled_from(OPS), min_size=1),
    st.sampled_from(["", "a", "a/", "a/b", "a/b/c", "a:b", "ab", "b/"]),
    st.one_of(st.none(), st.integers(1_900_000_000, 1_900_000_003)),
    st.one_of(st.none(), st.integers(0, 3)),
)


@settings(max_examples=150, deadline=None)
@given(parent=st.lists(caps_strategy, min_size=1, max_size=3), child=st.lists(caps_strategy, max_size=3))
def test_t007_narrowing_rejects_amplification(parent: list[Capability], child: list[Capability]) -> None:
    mem = Repo.memory()
    kernel.fork(mem, "p", caps=parent)
    covered = all(any(p.widening(c) is None for p in parent) for c in child)
    try:
        kernel.fork(mem, "c", source="p", caps=child)
    except CapabilityViolation:
        assert not covered
        return
    assert covered
    for c in child:
        for op in c.ops:
            for name in ("a", "a/b", "a/b/c/d", "a:b", "ab", "b/x", c.prefix):
                if c.allows(op, name, 0):
                    assert any(p.allows(op, name, 0) for p in parent)
                    assert prefix_covers(c.prefix, name)


AUDIT = """
import sys
def refuse(event, args):
    if event.startswith("socket.") or event == "urllib.Request":
        raise RuntimeError("network used: " + event)
sys.addaudithook(refuse)
from reelstore.backend.repo import Repo
from reelstore.kernel import snapshot as snapshots
from reelstore.kernel.views import live_views
from reelstore.kernel import verbs as kernel
from reelstore.maintenance import bundle as bundles
repo = Repo.init(sys.argv[1])
kernel.fork(repo, "a")
kernel.put(repo, "a", "x", b"local")
kernel.rm(repo, "a", "x")
kernel.put(repo, "a", "y", b"local")
assert kernel.get(repo, "a", "y") == b"local"
kernel.commit(repo, "a")
print("ok")
"""


def test_t008_class_a_needs_no_network(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", AUDIT, str(tmp_path)], capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.strip() == b"ok"


def test_t009_stale_class_b_is_e002_and_leaves_the_parent_unchanged(mem: Repo) -> None:
    kernel.fork(mem, "a")
    kernel.put(mem, "a", "x", b"1")
    kernel.effect(mem, "a", "versioned", {"key": "doc"})
    kh.VERSIONS["doc"] = "7"
    head, view = mem.refs["refs/heads/main"], mem.refs["refs/views/a"]
    with pytest.raises(Conflict):
        kernel.commit(mem, "a")
    assert mem.refs["refs/heads/main"] == head and mem.refs["refs/views/a"] == view and kh.FIRED == []
    kh.VERSIONS["doc"] = "0"
    kernel.commit(mem, "a")
    assert [k for _, k in kh.FIRED] == ["doc"]


def test_t010_fire_capability_only_from_commits_drain(mem: Repo) -> None:
    with pytest.raises(CapabilityViolation):
        FireToken()
    kernel.fork(mem, "a")
    kernel.effect(mem, "a", "recorder", {"n": 1, "trace": True})
    kernel.fork(mem, "b")
    kernel.effect(mem, "b", "recorder", {"n": 2, "trace": True})
    kernel.abort(mem, "b")
    kernel.commit(mem, "a")
    assert [n for _, n in kh.FIRED] == [1]
    (stack,) = kh.STACKS
    assert "commit" in stack and "drain" in stack and "abort" not in stack
    callers = [p for p in (ROOT / "reelstore").rglob("*.py") if "_mint(" in p.read_text()]
    assert [p.relative_to(ROOT).as_posix() for p in callers] == ["reelstore/drain/drainer.py"]


def test_t011_effects_block_decodes_rehashes_and_vanishes_after_abort_and_gc(any_repo: Repo) -> None:
    kernel.fork(any_repo, "a")
    kernel.effect(any_repo, "a", "recorder", {"n": 1})
    kernel.effect(any_repo, "a", "recorder", {"n": 2})
    h = any_repo.objects.get(any_repo.refs["refs/views/a"]).effects
    raw = any_repo.objects.get_raw(h)
    block = decode(raw)
    assert isinstance(block, Effects) and len(block.items) == 2 and Hash.of(raw) == h
    kernel.abort(any_repo, "a")
    gc(any_repo, "now")
    with pytest.raises(NotFound):
        any_repo.objects.get(h)


def test_t012_snapshot_restores_class_a_exactly(any_repo: Repo) -> None:
    kernel.fork(any_repo, "a")
    for n in range(40):
        kernel.put(any_repo, "a", f"docs/{n:02}.txt", f"body {n}".encode())
    kernel.rm(any_repo, "a", "docs/07.txt")
    snapshots.take(any_repo, "a", "s")
    before = kernel.ls(any_repo, "a")
    kernel.put(any_repo, "a", "docs/00.txt", b"changed after the snapshot")
    kernel.abort(any_repo, "a")
    restored = snapshots.restore(any_repo, "s", "b")
    assert kernel.ls(any_repo, "b") == before and restored.namespace == any_repo.objects.get(restored.id).namespace
    assert kernel.get(any_repo, "b", "docs/00.txt") == b"body 0"


def test_t013_restore_with_a_changed_class_b_version_warns(any_repo: Repo) -> None:
    kernel.fork(any_repo, "a")
    kernel.effect(any_repo, "a", "versioned", {"key": "doc"})
    snapshots.take(any_repo, "a", "s")
    kernel.abort(any_repo, "a")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        quiet = snapshots.restore(any_repo, "s", "unchanged")  # the version still holds: no warning
    assert quiet.changed == [] and len(quiet.pending) == 1
    kernel.abort(any_repo, "unchanged")
    kh.VERSIONS["doc"] = "3"
    with pytest.warns(snapshots.RestoreWarning, match="version changed"):
        result = snapshots.restore(any_repo, "s", "b")
    assert [e.effect_class for e in result.changed] == ["B"]
    with pytest.raises(Conflict):
        kernel.commit(any_repo, "b")
    assert kh.FIRED == []


def test_t014_restore_keeps_class_c_pending_for_the_user(mem: Repo) -> None:
    kernel.fork(mem, "a")
    kernel.effect(mem, "a", "recorder", {"n": 1})
    kernel.effect(mem, "a", "recorder", {"n": 2})
    snapshots.take(mem, "a", "s")
    kernel.abort(mem, "a")
    result = snapshots.restore(mem, "s", "b")
    assert [e.effect_class for e in result.pending] == ["C", "C"] and kh.FIRED == []
    assert len(kernel.pending_effects(mem, mem.objects.get_as(mem.refs["refs/views/b"], View))) == 2
    kernel.abort(mem, "b")
    assert kh.FIRED == []
    snapshots.restore(mem, "s", "c")
    kernel.commit(mem, "c")
    assert [n for _, n in kh.FIRED] == [1, 2]


def test_t012_restore_in_place_restores_class_a_exactly(any_repo: Repo) -> None:
    kernel.fork(any_repo, "a")
    for n in range(10):
        kernel.put(any_repo, "a", f"docs/{n}.txt", f"body {n}".encode())
    snapshots.take(any_repo, "a", "s")
    before = kernel.ls(any_repo, "a")
    kernel.put(any_repo, "a", "docs/0.txt", b"changed after the snapshot")
    kernel.put(any_repo, "a", "docs/new.txt", b"new")
    kernel.rm(any_repo, "a", "docs/5.txt")
    restored = snapshots.restore(any_repo, "s")  # onto the view it was taken from, which is live
    assert restored.in_place and restored.view == "a"
    assert kernel.ls(any_repo, "a") == before and kernel.get(any_repo, "a", "docs/0.txt") == b"body 0"
    assert [live.name for live in live_views(any_repo)] == ["a"]


def test_t013_restore_in_place_with_a_changed_class_b_version_warns(any_repo: Repo) -> None:
    kernel.fork(any_repo, "a")
    kernel.effect(any_repo, "a", "versioned", {"key": "doc"})
    snapshots.take(any_repo, "a", "s")
    kernel.effect(any_repo, "a", "recorder", {"n": 9})
    kh.VERSIONS["doc"] = "3"
    with pytest.warns(snapshots.RestoreWarning, match="version changed"):
        result = snapshots.restore(any_repo, "s")
    assert result.in_place and [e.effect_class for e in result.changed] == ["B"]
    assert [e.effect_class for e in result.pending] == ["B"] and [e.effect_class for e in result.dropped] == ["C"]
    with pytest.raises(Conflict):
        kernel.commit(any_repo, "a")
    assert kh.FIRED == []


def test_t014_restore_in_place_keeps_class_c_pending_for_the_user(mem: Repo) -> None:
    kernel.fork(mem, "a")
    kernel.effect(mem, "a", "recorder", {"n": 1})
    kernel.effect(mem, "a", "recorder", {"n": 2})
    snapshots.take(mem, "a", "s")
    kernel.effect(mem, "a", "recorder", {"n": 3})
    result = snapshots.restore(mem, "s")
    assert result.in_place and [e.effect_class for e in result.pending] == ["C", "C"] and result.left_out == []
    assert kh.FIRED == []
    assert len(kernel.pending_effects(mem, mem.objects.get_as(mem.refs["refs/views/a"], View))) == 2
    kernel.commit(mem, "a")
    assert [n for _, n in kh.FIRED] == [1, 2]  # the effect queued after the snapshot never fires


def test_l3_concurrent_forks_are_atomic_and_isolated(tmp_path: Path) -> None:
    repo = Repo.init(tmp_path)
    script = (
        "import sys; from reelstore.backend.repo import Repo; from reelstore.kernel import verbs as k; "
        "r = Repo.open(sys.argv[1]); n = sys.argv[2]; "
        "k.fork(r, 'v' + n); k.put(r, 'v' + n, 'own/' + n, n.encode())"
    )
    procs = [subprocess.Popen([sys.executable, "-c", script, str(tmp_path), str(n)]) for n in range(8)]
    assert [p.wait(timeout=120) for p in procs] == [0] * 8
    repo = Repo.open(tmp_path)
    for n in range(8):
        assert [name for name, _ in kernel.ls(repo, f"v{n}")] == [f"own/{n}"]
    assert sorted(live.name for live in live_views(repo)) == [f"v{n}" for n in range(8)]


@pytest.mark.parametrize("point", ["commit:record-written", "commit:advanced"])
def test_l3_a_commit_killed_at_its_commit_point_is_all_or_nothing(tmp_path: Path, point: str) -> None:
    repo = Repo.init(tmp_path)
    kernel.fork(repo, "a")
    kernel.put(repo, "a", "x", b"state")
    head = repo.refs["refs/heads/main"]
    env = {**os.environ, "REEL_TEST_CRASH_AT": point}
    killed = subprocess.run([*_cli(), "commit", "a"], cwd=tmp_path, env=env, capture_output=True, timeout=60)
    assert killed.returncode == -signal.SIGKILL
    repo = Repo.open(tmp_path)
    moved = repo.refs["refs/heads/main"] != head
    assert moved == (point == "commit:advanced")
    top = repo.objects.get_as(repo.refs["refs/heads/main"], Record)
    has_x = Namespace(repo.objects).get(top.namespace, "x") is not None
    assert has_x == moved and (top.view is not None) == moved
    assert (repo.refs.get("refs/views/a") is not None) or moved


def test_l3_same_store_content_gives_the_same_archive_bytes(tmp_path: Path) -> None:
    """Two stores built by different histories of operations over the same content write equal bundles."""
    a, b = Repo.init(tmp_path / "a"), Repo.init(tmp_path / "b")
    kernel.fork(a, "v")
    for n in range(30):
        kernel.put(a, "v", f"f{n}", bytes([n]) * 100)
    snapshots.take(a, "v", "s")
    view = a.refs["refs/snapshots/s"]
    for h in reach_walk(a.objects, [("s", view)]).reachable:  # copy, in another order, into store b
        b.objects.put(decode(a.objects.get_raw(h)))
    b.refs.set("refs/snapshots/s", view, None)
    bundles.create(a, tmp_path / "a.bundle", ["refs/snapshots/s"])
    bundles.create(b, tmp_path / "b.bundle", ["refs/snapshots/s"])
    assert (tmp_path / "a.bundle").read_bytes() == (tmp_path / "b.bundle").read_bytes()
