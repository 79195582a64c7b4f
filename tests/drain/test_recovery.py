"""Recovery with real processes: a recovery that is itself killed, and a zombie `reel commit` that
wakes up after a recovery took over (fenced: E016, and the target still acted once)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from conftest import REEL
from crashed_drain import _env, crashed_commit, op_state, reel
from target import Target, configure, pay_op

from reelstore.api import Store
from reelstore.backend.repo import Repo
from reelstore.drain import journal as drainlog


def test_a_killed_recovery_is_recovered_again(tmp_path: Path) -> None:
    with Target(tmp_path / "ledger.jsonl") as target:
        crashed_commit(tmp_path, target, "keyed", "after-send")
        killed = reel(tmp_path, "recover", REEL_TEST_CRASH_AT="drain:after-send")
        assert killed.returncode == -9
        done = reel(tmp_path, "recover")
        assert done.returncode == 0, done.stderr
        assert target.count("/keyed") == 1 and op_state(tmp_path)["state"] == "succeeded"
        assert (tmp_path / ".reel" / "epoch").read_text() == "2\n"
        history = json.loads(reel(tmp_path, "ops", "show", op_state(tmp_path)["op"], "--json").stdout)["history"]
        assert [(h["state"], h["epoch"]) for h in history] == [
            ("unknown", 0),
            ("unknown", 1),
            ("unknown", 2),
            ("succeeded", 2),
        ]


def test_a_zombie_commit_is_fenced_by_recovery(tmp_path: Path) -> None:
    with Target(tmp_path / "ledger.jsonl") as target:
        store = Store.init(tmp_path)
        configure(store.repo.config, target.url)
        store.fork("pay").effect("http", pay_op(target.url, "keyed"))
        target.fault = "stall-after-append"
        zombie = subprocess.Popen(
            [REEL, "commit", "pay"], cwd=tmp_path, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        try:
            assert target.stalled.wait(60), "the commit never reached the target"
            target.fault = None
            rescue = reel(tmp_path, "recover")
            assert rescue.returncode == 0, rescue.stderr
        finally:
            target.unstall.set()
            _, err = zombie.communicate(timeout=60)
        assert zombie.returncode == 6 and b"E016" in err
        assert target.count("/keyed") == 1 and op_state(tmp_path)["state"] == "succeeded"
        repo = Repo.open(tmp_path)
        epochs = [e.epoch for e in drainlog.walk(repo, repo.refs["refs/drains/main"])]
        assert epochs == [1, 1, 0], "the zombie must not have journaled anything after the new epoch"
