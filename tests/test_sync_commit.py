"""`reel commit VIEW --remote R`: two machines commit the same synced view against a real target;
the remote trunk's compare-and-swap lets exactly one of them drain."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from conftest import REEL
from gitserver import bare, fsck, git
from target import Target, configure, pay_op

from reelstore import sync
from reelstore.repo import Repo
from reelstore.store import Store


def test_concurrent_commit_remote_drains_once(tmp_path: Path) -> None:
    remote = bare(tmp_path / "shared.git")
    with Target(tmp_path / "ledger.jsonl") as target:
        a_dir, b_dir = tmp_path / "a", tmp_path / "b"
        a = Store.init(a_dir)
        configure(a.repo.config, target.url)
        a.fork("pay").effect("http", pay_op(target.url, "blind"))  # blind: the target acts on every request
        sync.add_remote(a.repo, "origin", str(remote))
        sync.push(a.repo, "origin")
        b, _ = sync.clone(str(remote), b_dir)
        configure(b.config, target.url)
        before = {d: Repo.open(d).refs["refs/heads/main"] for d in (a_dir, b_dir)}
        assert before[a_dir] == before[b_dir]

        env = {k: v for k, v in os.environ.items() if k != "REEL_DIR"}
        procs = {d: subprocess.Popen([REEL, "commit", "pay", "--remote", "origin"], cwd=d, env=env,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE) for d in (a_dir, b_dir)}
        outcome = {d: (p.wait(timeout=60), p.stderr.read().decode()) for d, p in procs.items()}
        for p in procs.values():
            p.stdout.close()
            p.stderr.close()
        assert sorted(rc for rc, _ in outcome.values()) == [0, 5], outcome
        assert target.count("/blind") == 1

        winner = next(d for d, (rc, _) in outcome.items() if rc == 0)
        loser = next(d for d, (rc, _) in outcome.items() if rc == 5)
        assert "E015" in outcome[loser][1]
        won, lost = Repo.open(winner), Repo.open(loser)
        assert won.refs["refs/heads/main"] != before[winner] and won.refs.get("refs/views/pay") is None
        assert lost.refs["refs/heads/main"] == before[loser] and lost.refs.get("refs/views/pay") is not None
        remote_record = sync.fetch(lost, "origin").refs["refs/remotes/origin/heads/main"]
        assert remote_record == won.refs["refs/heads/main"]
        fsck(remote)
        assert git("--git-dir", str(remote), "rev-list", "--count", "refs/reel/heads/main").strip() == "2"
