"""bench/bench_fastpaths.py --quick runs end to end and prints every row of the fast-path table (issue
15), reel beside git, its floors and dulwich, so the bench the notes quote cannot rot unseen. It asserts
no speed: timings belong to the bench, run by hand."""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "bench" / "bench_fastpaths.py"

ROWS = (
    "--version", "--help", "show-ref", "cat-file -p HEAD record", "update-ref refs/heads/b", "fork / git branch",
    "push, nothing to send", "cat-file --batch, bytecode not cached", "cat-file --batch, bytecode cached",
    "(reel, pure Python: REEL_PURE=1)", "empty store, bytecode cached", "500 objects", "2000 objects",
    "reel/git from 500 to 2000", "full push", "clone (git: --no-local, packs and indexes)",
    "incremental push of 10 objects", "full push: dulwich", "clone: dulwich", "incremental push: dulwich",
)


def test_the_quick_bench_prints_every_row_with_finite_ratios() -> None:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # the installed `reel`
    done = subprocess.run([sys.executable, str(BENCH), "--quick"], capture_output=True, env=env, timeout=280)
    out = done.stdout.decode()
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    lines = out.splitlines()
    missing = [r for r in ROWS if not any(line.lstrip().startswith(r) for line in lines)]
    assert not missing, out
    for side in ("reel/git", "reel/floor", "paired", "reel/dulwich"):
        ratios = [float(m) for m in re.findall(rf"{re.escape(side)}\s+([0-9.]+|nan|inf)x", out)]
        assert ratios and all(math.isfinite(r) and r > 0 for r in ratios), (side, out)
