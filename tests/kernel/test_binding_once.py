"""A view is bound to one remote: a push to a second remote leaves it out (never rebinds it), and a
lost binding file cannot make a pushed view committable here. The blind target's ledger is the oracle."""

from __future__ import annotations

from pathlib import Path

import pytest
from gitserver import bare
from target import Target, configure, pay_op

from reelstore import sync
from reelstore.api import Store
from reelstore.errors import RemoteConflict
from reelstore.maintenance.fsck import fsck


def test_a_second_remote_never_rebinds_a_view(tmp_path: Path) -> None:
    r1, r2 = bare(tmp_path / "r1.git"), bare(tmp_path / "r2.git")
    with Target(tmp_path / "ledger.jsonl") as target:
        a = Store.init(tmp_path / "a")
        configure(a.repo.config, target.url)
        a.fork("pay").effect("http", pay_op(target.url, "blind"))
        sync.add_remote(a.repo, "r1", str(r1))
        sync.add_remote(a.repo, "r2", str(r2))
        sync.push(a.repo, "r1")
        pushed = sync.push(a.repo, "r2")
        assert {r.ref: r.status for r in pushed.refs}["refs/views/pay"] == "bound-elsewhere"
        with pytest.raises(RemoteConflict):
            sync.push(a.repo, "r2", ["refs/views/pay"])
        with pytest.raises(RemoteConflict):
            a.commit("pay", remote="r2")
        b, _ = sync.clone(str(r1), tmp_path / "b")
        configure(b.config, target.url)
        Store(b).commit("pay", remote="origin")
        with pytest.raises(RemoteConflict):
            a.commit("pay", remote="r2")
        assert target.count("/blind") == 1
        c, _ = sync.clone(str(r2), tmp_path / "c")
        assert c.refs.get("refs/views/pay") is None


def test_a_lost_binding_file_keeps_the_view_bound_and_fsck_says_so(tmp_path: Path) -> None:
    r1 = bare(tmp_path / "r1.git")
    with Target(tmp_path / "ledger.jsonl") as target:
        a = Store.init(tmp_path / "a")
        configure(a.repo.config, target.url)
        a.fork("pay").effect("http", pay_op(target.url, "blind"))
        sync.add_remote(a.repo, "r1", str(r1))
        sync.push(a.repo, "r1")
        # Every file but the binding log and its group-commit lock.
        files = [p for p in (tmp_path / "a" / ".reel" / "bindings").iterdir() if not p.name.startswith("LOG")]
        assert len(files) == 1
        files[0].unlink()
        reopened = Store.open(tmp_path / "a")
        with pytest.raises(RemoteConflict):
            reopened.commit("pay")
        assert target.count("/blind") == 0
        problems = fsck(reopened.repo).problems
        assert any(files[0].name in p and "missing" in p for p in problems), problems
