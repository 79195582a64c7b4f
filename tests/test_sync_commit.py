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
from reelstore.api import Store
from reelstore.storage.repo import Repo


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
        seen = "\n".join([*(f"{d.name} exited {rc}: {err}" for d, (rc, err) in outcome.items()),
                          f"target answered: {target.answers}", f"ledger: {target.ledger()}"])
        assert sorted(rc for rc, _ in outcome.values()) == [0, 5], seen
        assert target.count("/blind") == 1, seen

        winner = next(d for d, (rc, _) in outcome.items() if rc == 0)
        loser = next(d for d, (rc, _) in outcome.items() if rc == 5)
        assert "E015" in outcome[loser][1]
        won, lost = Repo.open(winner), Repo.open(loser)
        assert won.refs["refs/heads/main"] != before[winner] and won.refs.get("refs/views/pay") is None
        assert lost.refs["refs/heads/main"] == before[loser] and lost.refs.get("refs/views/pay") is not None
        fetched = sync.fetch(lost, "origin")
        remote_record = fetched.refs["refs/remotes/origin/heads/main"]
        assert remote_record == won.refs["refs/heads/main"]
        fsck(remote)
        assert git("--git-dir", str(remote), "rev-list", "--count", "refs/reel/heads/main").strip() == "2"
        assert "refs/reel/views/pay" not in git("--git-dir", str(remote), "for-each-ref")

        # one fetch catches the loser up: its trunk fast-forwards and its copy of the view is terminal
        assert [(t.trunk, t.status) for t in fetched.trunks] == [("main", "fast-forward")]
        assert lost.refs["refs/heads/main"] == remote_record and lost.refs.get("refs/views/pay") is None
        assert fetched.retired == {"pay": remote_record}
        proc = subprocess.run([REEL, "recover"], cwd=loser, env=env, capture_output=True, timeout=60)
        assert proc.returncode == 0, proc.stderr.decode()
        assert target.count("/blind") == 1  # the loser caught up, and still fired nothing


def test_a_record_from_a_remote_is_never_drained_again_here(tmp_path: Path) -> None:
    """The store that committed a record drains it; a store that receives it by clone or fetch does
    not, even through `reel recover` (otherwise a blind effect would fire once per machine)."""
    remote = bare(tmp_path / "shared.git")
    with Target(tmp_path / "ledger.jsonl") as target:
        a = Store.init(tmp_path / "a")
        configure(a.repo.config, target.url)
        sync.add_remote(a.repo, "origin", str(remote))
        a.fork("pay").effect("http", pay_op(target.url, "blind"))
        a.commit("pay")
        assert target.count("/blind") == 1
        sync.push(a.repo, "origin")

        b, _ = sync.clone(str(remote), tmp_path / "b")
        configure(b.config, target.url)
        env = {k: v for k, v in os.environ.items() if k != "REEL_DIR"}
        for args in (["recover"], ["--json", "ops"]):
            proc = subprocess.run([REEL, *args], cwd=tmp_path / "b", env=env, capture_output=True, timeout=60)
            assert proc.returncode == 0, proc.stderr.decode()
        assert '"op"' not in proc.stdout.decode()  # nothing is B's to drain
        assert target.count("/blind") == 1

        proc = subprocess.run([REEL, "recover"], cwd=tmp_path / "a", env=env, capture_output=True, timeout=60)
        assert proc.returncode == 0, proc.stderr.decode()
        assert target.count("/blind") == 1
