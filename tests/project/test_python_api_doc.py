"""docs/python-api.md's example runs as written, prints what its comments say, and passes
`mypy --strict`: the typed results it documents are the ones a user's checker sees."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "python-api.md"


def _example() -> str:
    code = re.search(r"```python\n(.*?)```", DOC.read_text(), re.S)
    assert code is not None
    return code.group(1)


def test_the_example_runs_and_prints_its_comments(tmp_path: Path) -> None:
    code = _example()
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()
    promised = [m.group(1).strip() for m in re.finditer(r"print\(.*# (.*)$", code, re.M)]
    assert len(promised) == 8
    assert proc.stdout.decode().splitlines() == promised


def test_the_example_type_checks_strictly(tmp_path: Path) -> None:
    user = tmp_path / "example.py"
    user.write_text(_example())
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent", "--no-incremental", str(user)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0 and "Success" in proc.stdout, proc.stdout
