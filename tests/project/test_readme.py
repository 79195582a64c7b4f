"""The README's Python example runs as written and prints what its comments say."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_python_example_runs_and_prints_its_comments(tmp_path: Path) -> None:
    code = re.search(r"```python\n(.*?)```", README.read_text(), re.S)
    assert code is not None
    proc = subprocess.run([sys.executable, "-c", code.group(1)], cwd=tmp_path, capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()
    promised = [m.group(1).strip() for m in re.finditer(r"print\(.*# (.*)$", code.group(1), re.M)]
    assert proc.stdout.decode().splitlines() == promised
