"""Run every `bench/bench_*.py` in turn and report which ones failed.

python3 bench/run.py [NAME-FILTER…] [-- ARGS passed to each script]
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(argv: list[str]) -> int:
    extra: list[str] = []
    if "--" in argv:
        at = argv.index("--")
        argv, extra = argv[:at], argv[at + 1 :]
    scripts = sorted(HERE.glob("bench_*.py"))
    if argv:
        scripts = [s for s in scripts if any(f in s.stem for f in argv)]
    failed = []
    for script in scripts:
        print(f"### {script.name}", flush=True)
        start = time.perf_counter()
        code = subprocess.call([sys.executable, str(script), *extra])
        print(f"### {script.name}: exit {code} after {time.perf_counter() - start:.1f}s\n", flush=True)
        if code:
            failed.append(script.name)
    if failed:
        print("failed: " + ", ".join(failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
