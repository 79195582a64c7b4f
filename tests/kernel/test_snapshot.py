"""Snapshots and restore (restore's promises: test_conformance.py) and bundles, through the kernel and
the real `reel` command."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import kernel_helpers as kh
import pytest
from conftest import REEL
from target import Target, pay_op
from test_approvals import rule

from reelstore import crashpoints
from reelstore.api import Store
from reelstore.backend.repo import Repo
from reelstore.errors import ApprovalRequired, BadInput, CapabilityViolation, Conflict, NotFound
from reelstore.kernel import snapshot as snapshots
from reelstore.kernel import verbs as kernel
from reelstore.maintenance import bundle as bundles
from reelstore.objects import View


@pytest.fixture(autouse=True)
def _clean() -> None:
    kh.reset()


def _queued(repo: Repo, view: str, n: int) -> None:
    kernel.effect(repo, view, "recorder", {"n": n})


def test_effects_left_out_while_the_original_is_live_and_after_it_committed(mem: Repo) -> None:
    kernel.fork(mem, "a")
    _queued(mem, "a", 1)
    snapshots.take(mem, "a", "s")
    live_copy = snapshots.restore(mem, "s", "copy")
    assert live_copy.pending == [] and [e.why for e in live_copy.left_out] == ["still pending in live view 'a'"]
    kernel.abort(mem, "copy")
    kernel.commit(mem, "a")
    assert [n for _, n in kh.FIRED] == [1]
    after = snapshots.restore(mem, "s", "late")
    assert after.pending == [] and after.left_out[0].why.startswith("already committed in record")
    kernel.commit(mem, "late")
    assert [n for _, n in kh.FIRED] == [1]


def test_a_restored_copy_is_restored_once(mem: Repo) -> None:
    kernel.fork(mem, "a")
    _queued(mem, "a", 7)
    snapshots.take(mem, "a", "s")
    kernel.abort(mem, "a")
    first = snapshots.restore(mem, "s", "one")
    second = snapshots.restore(mem, "s", "two")
    assert len(first.pending) == 1 and second.pending == [] and len(second.left_out) == 1
    kernel.commit(mem, "one")
    kernel.commit(mem, "two")
    assert [n for _, n in kh.FIRED] == [7]


def test_restore_in_place_never_makes_two_live_holders(mem: Repo) -> None:
    kernel.fork(mem, "a")
    _queued(mem, "a", 1)
    snapshots.take(mem, "a", "s")
    kernel.abort(mem, "a")
    copy = snapshots.restore(mem, "s", "copy")  # a new view: it holds the effect now
    assert copy.in_place is False and len(copy.pending) == 1
    again = snapshots.restore(mem, "s")  # the original name is not live: made anew, without the held effect
    assert again.view == "a" and again.pending == [] and again.left_out[0].why == "still pending in live view 'copy'"
    onto_copy = snapshots.restore(mem, "s", "copy")  # named explicitly: reset in place, it keeps its effect
    assert onto_copy.in_place and len(onto_copy.pending) == 1 and onto_copy.dropped == []
    assert (
        mem.objects.get_as(mem.refs["refs/views/copy"], View).meta["fork"]
        == mem.objects.get_as(copy.id, View).meta["fork"]
    )  # the same view, not a new one
    kernel.commit(mem, "a")
    kernel.commit(mem, "copy")
    assert [n for _, n in kh.FIRED] == [1]


def test_restore_in_place_refuses_an_unrelated_view_of_the_same_name(mem: Repo) -> None:
    kernel.fork(mem, "a")
    _queued(mem, "a", 1)
    snapshots.take(mem, "a", "s")
    kernel.abort(mem, "a")
    kernel.fork(mem, "a")  # a new view that only shares the name
    _queued(mem, "a", 2)
    held = mem.refs["refs/views/a"]
    with pytest.raises(Conflict, match="not the view snapshot 's' was taken from"):
        snapshots.restore(mem, "s")
    assert mem.refs["refs/views/a"] == held
    replaced = snapshots.restore(mem, "s", "a")  # named with --as: replaced, its own effect dropped
    assert replaced.in_place and [e.effect_class for e in replaced.dropped] == ["C"] and len(replaced.pending) == 1
    kernel.commit(mem, "a")
    assert [n for _, n in kh.FIRED] == [1]


def test_restore_in_place_of_a_committed_view_makes_it_anew(mem: Repo) -> None:
    kernel.fork(mem, "a")
    _queued(mem, "a", 1)
    snapshots.take(mem, "a", "s")
    kernel.commit(mem, "a")
    again = snapshots.restore(mem, "s")
    assert not again.in_place and again.pending == [] and again.left_out[0].why.startswith("already committed")


def test_a_view_restored_anew_between_a_commit_and_its_retire_survives_the_retire(mem: Repo) -> None:
    """The commit landed; before it deleted the view's ref, a restore made the name anew (a new lineage).
    The commit's retire must leave that new view alone: it is not the view the commit landed."""
    kernel.fork(mem, "a")
    _queued(mem, "a", 1)
    snapshots.take(mem, "a", "s")
    made: list[snapshots.RestoreResult] = []

    def restore_now(point: str) -> None:
        if point == "commit:logged" and not made:
            made.append(snapshots.restore(mem, "s"))

    with crashpoints.hooked(restore_now):
        kernel.commit(mem, "a")
    assert made and not made[0].in_place
    assert mem.refs.get("refs/views/a") == made[0].id


def test_cli_restore_in_place(reel, tmp_path: Path) -> None:
    reel("init", check=True)
    reel("fork", "work", check=True)
    for name in ("a", "b"):
        op = json.dumps({"action": "write", "path": f"out/{name}.txt", "content": f"{name}\n"})
        reel("effect", "work", "--adapter", "fs", "--op", op, check=True)
        if name == "a":
            reel("snapshot", "work", "s1", check=True)
    out = json.loads(reel("--json", "restore", "s1", check=True).stdout)
    assert out["in_place"] and out["view"] == "work" and [e["resource"] for e in out["pending"]] == ["fs:out/a.txt"]
    assert [e["resource"] for e in out["dropped"]] == ["fs:out/b.txt"] and out["left_out"] == []
    text = reel("restore", "s1", check=True).stdout.decode()
    assert text.startswith("restored snapshot s1 onto live view work (") and "1 effect pending" in text
    reel("commit", "work", check=True)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["a.txt"]


def test_restore_in_place_racing_a_commit(reel, tmp_path: Path) -> None:
    """Real processes, started together: whichever lands first, no effect has two live holders and an
    effect queued after the snapshot fires only if the commit landed before the restore."""
    reel("init", check=True)
    for n in range(3):
        view = f"w{n}"
        reel("fork", view, check=True)
        for name in ("kept", "later"):
            op = json.dumps({"action": "write", "path": f"out/{n}/{name}.txt", "content": "x"})
            reel("effect", view, "--adapter", "fs", "--op", op, check=True)
            if name == "kept":
                reel("snapshot", view, f"s{n}", check=True)
        env = {k: v for k, v in os.environ.items() if k != "REEL_DIR"}
        procs = [
            subprocess.Popen([REEL, *args], cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            for args in (["commit", view], ["restore", f"s{n}"])
        ]
        commit_rc, restore_rc = [p.wait(timeout=120) for p in procs]
        for p in procs:
            p.communicate()
        assert commit_rc in (0, 5) and restore_rc == 0, (commit_rc, restore_rc)
        views = {v["name"]: v for v in json.loads(reel("--json", "views", check=True).stdout)["views"]}
        kept, later = ((tmp_path / "out" / str(n) / f"{name}.txt").exists() for name in ("kept", "later"))
        if later:  # the commit landed first: the restore made the view anew, holding none of its effects
            assert commit_rc == 0 and kept and views[view]["effects"] == 0
        elif commit_rc == 0:  # the restore landed first and the commit took the restored view
            assert kept and view not in views
        else:  # the restore landed first and the commit lost its compare-and-swap
            assert not kept and views[view]["effects"] == 1


def test_restore_of_a_view_whose_commit_landed_but_was_not_drained(reel, tmp_path: Path) -> None:
    """A commit killed right after its commit point (which retires the view's ref in the same step),
    before its drain: a restore sees the commit that landed, restores nothing it carried, and recover
    sends each effect once."""
    reel("init", check=True)
    reel("fork", "w", check=True)
    for name in ("kept", "later"):
        op = json.dumps({"action": "write", "path": f"out/{name}.txt", "content": name})
        reel("effect", "w", "--adapter", "fs", "--op", op, check=True)
        if name == "kept":
            reel("snapshot", "w", "s", check=True)
    env = {k: v for k, v in os.environ.items() if k != "REEL_DIR"}
    killed = subprocess.run(
        [REEL, "commit", "w"],
        cwd=tmp_path,
        env={**env, "REEL_TEST_CRASH_AT": "commit:advanced"},
        capture_output=True,
        timeout=120,
    )
    assert killed.returncode == -9 and reel("show-ref", "-q", "--verify", "refs/views/w").returncode != 0
    out = json.loads(reel("--json", "restore", "s", check=True).stdout)
    assert not out["in_place"] and out["pending"] == [] and out["left_out"][0]["why"].startswith("already committed")
    reel("abort", "w", check=True)  # the restored view: it holds nothing
    assert reel("recover").returncode == 0
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["kept.txt", "later.txt"]


def test_restore_in_place_keeps_a_refusal_of_the_state_it_restores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Target(tmp_path / "ledger.jsonl") as target:
        store = Store.init(tmp_path / "s")
        rule(store.repo, target.url)
        monkeypatch.setenv("REEL_PRINCIPAL", "agent")
        view = store.fork("pay")
        view.effect("http", pay_op(target.url, "blind"))
        snapshots.take(store.repo, "pay", "s")
        monkeypatch.setenv("REEL_PRINCIPAL", "dave")
        store.reject("pay", "dave", "amount is wrong")
        monkeypatch.setenv("REEL_PRINCIPAL", "agent")
        view.put("note.txt", b"changed after the refusal")
        assert snapshots.restore(store.repo, "s").in_place  # back to the very state dave refused
        monkeypatch.setenv("REEL_PRINCIPAL", "bob")
        store.approve("pay", "bob")
        monkeypatch.setenv("REEL_PRINCIPAL", "agent")
        with pytest.raises(ApprovalRequired, match=r"refused by dave \(amount is wrong\)"):
            store.commit("pay")
        assert target.requests == 0


def test_restore_never_widens_a_trunk_that_narrowed(mem: Repo) -> None:
    kernel.fork(mem, "a")
    kernel.put(mem, "a", "docs/x", b"1")
    snapshots.take(mem, "a", "s")
    kernel.abort(mem, "a")
    mem.config.set("trunk.main.cap", "read=docs/")
    with pytest.raises(CapabilityViolation):
        snapshots.restore(mem, "s", "b")
    assert mem.refs.get("refs/views/b") is None


def test_snapshot_names_and_errors(mem: Repo) -> None:
    kernel.fork(mem, "a")
    snap = snapshots.take(mem, "a")
    assert snap.name == "a" and [s.name for s in snapshots.list_snapshots(mem)] == ["a"]
    kernel.put(mem, "a", "x", b"2")
    with pytest.raises(Conflict):
        snapshots.take(mem, "a")
    moved = snapshots.take(mem, "a", force=True)
    assert moved.id != snap.id
    with pytest.raises(NotFound):
        snapshots.restore(mem, "nope")
    snapshots.delete(mem, "a")
    with pytest.raises(NotFound):
        snapshots.delete(mem, "a")


def test_a_snapshot_keeps_its_objects_through_gc(reel, tmp_path: Path) -> None:
    reel("init", check=True)
    reel("fork", "a", check=True)
    (tmp_path / "f.txt").write_text("kept\n")
    reel("put", "a", "notes/f.txt", "f.txt", check=True)
    reel("snapshot", "a", "s", check=True)
    reel("abort", "a", check=True)
    reel("gc", "--prune=now", check=True)
    reel("restore", "s", "--as", "b", check=True)
    assert reel("get", "b", "notes/f.txt", check=True).stdout == b"kept\n"


def test_cli_restore_keeps_class_c_pending_and_commit_fires_it_once(reel, tmp_path: Path) -> None:
    reel("init", check=True)
    reel("fork", "a", check=True)
    op = json.dumps({"action": "write", "path": "out/r.txt", "content": "sent\n"})
    reel("effect", "a", "--adapter", "fs", "--op", op, check=True)
    reel("snapshot", "a", "s", check=True)
    reel("abort", "a", check=True)
    out = json.loads(reel("--json", "restore", "s", "--as", "b", check=True).stdout)
    assert [e["class"] for e in out["pending"]] == ["C"] and out["left_out"] == []
    assert not (tmp_path / "out" / "r.txt").exists()
    reel("commit", "b", check=True)
    assert (tmp_path / "out" / "r.txt").read_text() == "sent\n"
    again = reel("restore", "s", "--as", "c", check=True).stdout.decode()
    assert "left out C" in again and "already committed" in again


def _store_with_history(reel, tmp_path: Path) -> None:
    reel("init", check=True)
    for n in range(3):
        reel("fork", f"v{n}", check=True)
        (tmp_path / "f.txt").write_text(f"version {n}\n" * 50)
        reel("put", f"v{n}", f"docs/{n}.txt", "f.txt", check=True)
        reel("put", f"v{n}", "docs/shared.txt", "f.txt", check=True)
        if n < 2:
            reel("commit", f"v{n}", check=True)
    reel("snapshot", "v2", "keep", check=True)


def test_l3_bundles_are_byte_deterministic(reel, tmp_path: Path) -> None:
    """Same objects and refs, the same bytes: loose or packed, and after a trip through another store."""
    _store_with_history(reel, tmp_path)
    loose = tmp_path / "loose.bundle"
    reel("bundle", "create", str(loose), check=True)
    reel("repack", "-a", "-d", check=True)
    packed = tmp_path / "packed.bundle"
    reel("bundle", "create", str(packed), check=True)
    assert loose.read_bytes() == packed.read_bytes()
    other = tmp_path / "other"
    other.mkdir()
    reel("init", cwd=other, check=True)
    reel("bundle", "unbundle", str(packed), cwd=other, check=True)
    # The fresh store has its own trunk root; bring the refs over by name, then bundle the same refs.
    for line in reel("bundle", "list-heads", str(packed), check=True).stdout.decode().splitlines():
        h, name = line.split(" ", 1)
        reel("update-ref", name, h, cwd=other, check=True)
    again = tmp_path / "again.bundle"
    reel("bundle", "create", str(again), cwd=other, check=True)
    assert again.read_bytes() == loose.read_bytes()
    info = json.loads(reel("--json", "bundle", "verify", str(again), check=True).stdout)
    assert set(info["refs"]) == {"refs/heads/main", "refs/snapshots/keep", "refs/views/v2"}


def test_every_damaged_byte_of_a_bundle_is_refused(tmp_path: Path, repo: Repo) -> None:
    kernel.fork(repo, "a")
    kernel.put(repo, "a", "x", b"content " * 20)
    kernel.commit(repo, "a")
    path = tmp_path / "b.bundle"
    bundles.create(repo, path, ["main"])
    good = path.read_bytes()
    step = max(1, len(good) // 200)
    for at in range(0, len(good), step):
        damaged = bytearray(good)
        damaged[at] ^= 0x20
        path.write_bytes(bytes(damaged))
        with pytest.raises((BadInput, NotFound)):
            bundles.verify(path)
    for cut in (0, 5, len(good) // 2, len(good) - 1):
        path.write_bytes(good[:cut])
        with pytest.raises(BadInput):
            bundles.verify(path)
    path.write_bytes(good + b"x")
    with pytest.raises(BadInput):
        bundles.verify(path)


def test_cli_bundle_errors_and_held_back_views(reel, tmp_path: Path) -> None:
    reel("init", check=True)
    reel("fork", "a", check=True)
    op = json.dumps({"action": "write", "path": "out/r.txt", "content": "x\n"})
    reel("effect", "a", "--adapter", "fs", "--op", op, check=True)
    reel("bundle", "create", "b.bundle", check=True)
    missing = reel("bundle", "verify", "no-such.bundle")
    assert missing.returncode == 4 and b"E001" in missing.stderr and b"Traceback" not in missing.stderr
    (tmp_path / "junk.bundle").write_bytes(b"not a bundle at all")
    junk = reel("bundle", "verify", "junk.bundle")
    assert junk.returncode == 6 and b"E014" in junk.stderr
    other = tmp_path / "other"
    other.mkdir()
    reel("init", cwd=other, check=True)
    out = reel("--json", "bundle", "unbundle", "--update-refs", str(tmp_path / "b.bundle"), cwd=other)
    assert out.returncode == 5  # refs/heads/main differs in the fresh store
    doc = json.loads(out.stdout)
    assert doc["held_back"] == ["refs/views/a"] and doc["conflicting"] == ["refs/heads/main"]
    assert reel("views", cwd=other, check=True).stdout == b""
    forced = json.loads(
        reel(
            "--json",
            "bundle",
            "unbundle",
            "--update-refs",
            "--with-pending-effects",
            str(tmp_path / "b.bundle"),
            cwd=other,
        ).stdout
    )
    assert forced["created"] == ["refs/views/a"]


def test_snapshot_and_operator_refs_must_hold_their_kinds(reel, tmp_path: Path) -> None:
    reel("init", check=True)
    reel("fork", "a", check=True)
    blob = reel("hash-object", "-w", "--stdin", input=b"not a view\n", check=True).stdout.decode().strip()
    for ref in ("refs/snapshots/s", "refs/ops/op_0123"):
        bad = reel("update-ref", ref, blob)
        assert bad.returncode == 6 and b"E014" in bad.stderr, (ref, bad.stderr)
