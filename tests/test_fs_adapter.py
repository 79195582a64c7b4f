"""The fs adapter: Class C writes and deletes under its root, never outside it, written atomically."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from reelstore.adapters.fs import FsAdapter
from reelstore.errors import BadInput
from reelstore.kernel import verbs as kernel
from reelstore.storage.repo import Repo


def test_write_and_delete_fire_through_commit(tmp_path: Path, repo: Repo) -> None:
    (tmp_path / "gone.txt").write_text("old")
    kernel.fork(repo, "a")
    kernel.effect(repo, "a", "fs", {"action": "write", "path": "out/deep/a.txt", "content": "héllo", "mode": "0600"})
    kernel.effect(repo, "a", "fs", {"action": "delete", "path": "gone.txt"})
    assert (tmp_path / "gone.txt").exists() and not (tmp_path / "out").exists()
    res = kernel.commit(repo, "a")
    assert res.drain is not None and [o.state for o in res.drain.outcomes] == ["succeeded", "succeeded"]
    assert (tmp_path / "out/deep/a.txt").read_text() == "héllo"
    assert (tmp_path / "out/deep/a.txt").stat().st_mode & 0o777 == 0o600
    assert not (tmp_path / "gone.txt").exists()


def test_root_comes_from_config(tmp_path: Path, repo: Repo) -> None:
    repo.config.set("adapter.fs.root", "sandbox")
    repo.config.save()
    kernel.fork(repo, "a")
    made = kernel.effect(repo, "a", "fs", {"action": "write", "path": "f", "content": "x"})
    assert made.resource == "fs:f" and made.effect_class == "C" and made.delivery == "keyed"
    kernel.commit(repo, "a")
    assert (tmp_path / "sandbox" / "f").read_text() == "x"


@pytest.mark.parametrize("path", ["../escape", "a/../../escape", "/etc/passwd", "", ".", "a/\0b"])
def test_escaping_paths_are_refused_at_admission(repo: Repo, path: str) -> None:
    kernel.fork(repo, "a")
    with pytest.raises(BadInput):
        kernel.effect(repo, "a", "fs", {"action": "write", "path": path, "content": "x"})
    assert kernel.status(repo, "a")["effects"] == []


def test_symlink_leaving_the_root_is_refused(tmp_path: Path, repo: Repo) -> None:
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.mkdir()
    os.symlink(outside, tmp_path / "link")
    kernel.fork(repo, "a")
    with pytest.raises(BadInput):
        kernel.effect(repo, "a", "fs", {"action": "write", "path": "link/x", "content": "x"})
    kernel.effect(repo, "a", "fs", {"action": "write", "path": "later/x", "content": "x"})
    os.symlink(outside, tmp_path / "later")
    res = kernel.commit(repo, "a")
    assert res.drain is not None and res.drain.outcomes[0].state == "failed"
    assert list(outside.iterdir()) == []


def test_symlink_inside_the_root_is_allowed(tmp_path: Path, repo: Repo) -> None:
    (tmp_path / "real").mkdir()
    os.symlink(tmp_path / "real", tmp_path / "alias")
    kernel.fork(repo, "a")
    kernel.effect(repo, "a", "fs", {"action": "write", "path": "alias/x", "content": "in"})
    kernel.commit(repo, "a")
    assert (tmp_path / "real" / "x").read_text() == "in"


@pytest.mark.parametrize("op", [
    {"action": "move", "path": "x"},
    {"action": "write", "path": "x"},
    {"action": "write", "path": "x", "content": 3},
    {"action": "write", "path": "x", "content": "c", "mode": "4755"},
    {"action": "delete", "path": "x", "content": "c"},
    {"action": "write", "path": "x", "content": "c", "extra": 1},
])
def test_malformed_ops_are_e014(repo: Repo, op: dict) -> None:
    with pytest.raises(BadInput):
        FsAdapter(repo).classify(op)


def test_reconcile_looks_at_the_file(tmp_path: Path, repo: Repo) -> None:
    kernel.fork(repo, "a")
    made = kernel.effect(repo, "a", "fs", {"action": "write", "path": "r.txt", "content": "want"})
    fs = FsAdapter(repo)
    assert fs.reconcile(made, "op") == "absent"
    (tmp_path / "r.txt").write_text("want")
    assert fs.reconcile(made, "op") == "succeeded"


def test_write_is_atomic_no_temp_files_left(tmp_path: Path, repo: Repo) -> None:
    kernel.fork(repo, "a")
    for i in range(3):
        kernel.effect(repo, "a", "fs", {"action": "write", "path": "out/f", "content": f"v{i}"})
    kernel.commit(repo, "a")
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["f"]
    assert (tmp_path / "out/f").read_text() == "v2"
