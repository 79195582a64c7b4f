"""A real `reel commit` killed at a named point of its drain, and the `reel` runs that inspect and
recover it afterwards: shared by the crash, recovery, operator and restore tests."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from conftest import REEL
from target import Target, configure, pay_op

from reelstore.api import Store


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("REEL_DIR", "REEL_TEST_CRASH_AT")}
    env.update(extra)
    return env


def reel(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([REEL, *args], cwd=cwd, env=_env(**env), capture_output=True, timeout=60)


def crashed_commit(tmp_path: Path, target: Target, tier: str, point: str) -> None:
    """Queue one payment in a view and kill `reel commit` at `point`."""
    store = Store.init(tmp_path)
    configure(store.repo.config, target.url)
    store.fork("pay").effect("http", pay_op(target.url, tier))
    env = {"REEL_TEST_CRASH_AT": "drain:" + point} if point != "target-kills" else {}
    target.fault = "kill-after-append" if point == "target-kills" else None
    proc = subprocess.Popen(
        [REEL, "commit", "pay"], cwd=tmp_path, env=_env(**env), stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    target.victim = proc.pid
    proc.communicate(timeout=60)
    assert proc.returncode == -9, f"reel commit should have been killed at {point}, exited {proc.returncode}"
    target.fault = None


def op_state(tmp_path: Path) -> dict:
    out = reel(tmp_path, "ops", "--json")
    assert out.returncode == 0, out.stderr
    (doc,) = json.loads(out.stdout)
    return doc
