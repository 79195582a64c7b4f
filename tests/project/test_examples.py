"""Each example in examples/ runs, as a user would run it, against a real loopback ledger."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from target import Target

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _run(*args: str, cwd: Path) -> str:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("REEL_DIR", None)
    done = subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, timeout=180)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    return done.stdout.decode()


def _bodies(target: Target) -> list[dict]:
    return [json.loads(line).get("body") or json.loads(line) for line in target.ledger_path.read_text().splitlines()]


def test_mcp_session_example_fires_only_the_committed_attempt(tmp_path: Path) -> None:
    with Target(tmp_path / "ledger.jsonl") as target:
        out = _run(str(EXAMPLES / "mcp_session.py"), str(tmp_path / "store"), f"{target.url}/blind", cwd=tmp_path)
        assert "try-1: abort" in out and "try-2: commit" in out and '"committed": true' in out
        assert len(target.ledger_path.read_text().splitlines()) == 1


def test_async_agent_example_commits_the_even_attempts(tmp_path: Path) -> None:
    with Target(tmp_path / "ledger.jsonl") as target:
        out = _run(str(EXAMPLES / "async_agent.py"), str(tmp_path / "store"), f"{target.url}/blind", cwd=tmp_path)
        assert out.count("committed") == 2 and out.count("aborted") == 2
        assert len(target.ledger_path.read_text().splitlines()) == 2


def test_tool_loop_example_sends_nothing_until_approved(tmp_path: Path) -> None:
    with Target(tmp_path / "ledger.jsonl") as target:
        rejected = _run(
            str(EXAMPLES / "tool_loop.py"), str(tmp_path / "a"), f"{target.url}/blind", "reject", cwd=tmp_path
        )
        assert "2 effects pending" in rejected and target.ledger_path.read_text() == ""
        approved = _run(
            str(EXAMPLES / "tool_loop.py"), str(tmp_path / "b"), f"{target.url}/blind", "approve", cwd=tmp_path
        )
        assert "'succeeded', 'succeeded'" in approved
        assert len(target.ledger_path.read_text().splitlines()) == 2
