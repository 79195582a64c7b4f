"""Restoring `.reel` from a backup taken while an operation was unknown brings the unknown back:
a finding recorded after the backup is gone with it, and recovery still sends nothing."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from crashed_drain import crashed_commit, reel
from target import Target


def test_restored_backup_keeps_the_op_unknown_and_recover_sends_nothing(tmp_path: Path) -> None:
    with Target(tmp_path / "ledger.jsonl") as target:
        crashed_commit(tmp_path, target, "blind", "after-send")
        store, backup = tmp_path / ".reel", tmp_path / "backup.reel"
        shutil.copytree(store, backup)
        (doc,) = json.loads(reel(tmp_path, "ops", "--unresolved", "--json").stdout)
        done = reel(
            tmp_path,
            "reconcile",
            doc["op"],
            "--outcome",
            "succeeded",
            "--evidence",
            "seen on ledger",
            "--observer",
            "carol",
        )
        assert done.returncode == 0, done.stderr
        assert json.loads(reel(tmp_path, "ops", "--unresolved", "--json").stdout) == []

        shutil.rmtree(store)
        shutil.copytree(backup, store)
        (again,) = json.loads(reel(tmp_path, "ops", "--unresolved", "--json").stdout)
        assert again["op"] == doc["op"] and again["state"] == "unknown"
        requests = target.requests
        rec = reel(tmp_path, "recover")
        assert rec.returncode == 7 and b"E011" in rec.stderr
        assert target.count("/") == 1 and target.requests == requests
