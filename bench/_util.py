"""Shared helpers for the benchmarks: timing, scratch directories, git, payloads and the result table.

Every `bench/bench_*.py` script measures reelstore next to git and dulwich on the same generated data
and prints one table through `print_table`, so the figures of all areas read the same way.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """Seconds one call of `fn` took, and what it returned."""
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def median_time(fn: Callable[[], Any], repeat: int = 3, setup: Callable[[], Any] | None = None) -> float:
    """Median seconds over `repeat` calls; `setup` runs untimed before each call (fresh state)."""
    times = []
    for _ in range(repeat):
        if setup is not None:
            setup()
        times.append(timed(fn)[0])
    return statistics.median(times)


@contextlib.contextmanager
def scratch(prefix: str = "reelbench-") -> Iterator[Path]:
    """A temporary directory removed afterwards, even on error."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def fresh_dir(parent: Path, name: str) -> Path:
    """`parent/name`, emptied if it already exists."""
    path = parent / name
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return path


GIT_ENV = {
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@example.invalid",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@example.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
}


def git(*args: str, cwd: Path | None = None, input: bytes | None = None, check: bool = True) -> bytes:
    """Run git with a neutral environment and return its stdout."""
    env = {**os.environ, **GIT_ENV, "HOME": str(cwd or Path.cwd())}
    proc = subprocess.run(["git", *args], cwd=cwd, input=input, capture_output=True, env=env)
    if check and proc.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed ({proc.returncode}): {proc.stderr.decode(errors='replace')}")
    return proc.stdout


def git_init(path: Path, bare: bool = True) -> Path:
    """A fresh git repository at `path` (bare by default: benchmarks only need its object database)."""
    path.mkdir(parents=True, exist_ok=True)
    git("init", "-q", *(["--bare"] if bare else []), str(path), cwd=path)
    return path


def reel(*args: str, cwd: Path, input: bytes | None = None, check: bool = True) -> bytes:
    """Run the installed `reel` command and return its stdout."""
    proc = subprocess.run([shutil.which("reel") or "reel", *args], cwd=cwd, input=input, capture_output=True)
    if check and proc.returncode != 0:
        raise RuntimeError(f"reel {' '.join(args)} failed ({proc.returncode}): {proc.stderr.decode(errors='replace')}")
    return proc.stdout


def payloads(n: int, low: int = 50, high: int = 500, seed: int = 1) -> list[bytes]:
    """`n` distinct deterministic random payloads of `low`..`high` bytes (same seed → same data)."""
    if low < 4:
        raise ValueError("payloads start with a 4-byte counter, so low must be at least 4")
    rng = random.Random(seed)
    return [i.to_bytes(4, "big") + rng.randbytes(rng.randint(low, high) - 4) for i in range(n)]


def fast_import_blobs(data: Sequence[bytes]) -> bytes:
    """A `git fast-import` stream writing each payload as a blob (no commit, no ref)."""
    parts = []
    for i, blob in enumerate(data, 1):
        parts.append(b"blob\nmark :%d\ndata %d\n" % (i, len(blob)))
        parts.append(blob)
        parts.append(b"\n")
    return b"".join(parts)


Row = tuple[str, "float | None", "float | None", "float | None"]


@dataclass
class Table:
    """Rows of `name, reelstore, git, dulwich` seconds; ratios are reelstore / other (lower is better)."""

    title: str
    rows: list[Row] = field(default_factory=list)

    def add(self, name: str, reelstore: float | None, git: float | None = None, dulwich: float | None = None) -> None:
        self.rows.append((name, reelstore, git, dulwich))

    def print(self, file: Any = None) -> None:
        print_table(self.title, self.rows, file=file)


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x * 1000:.1f}ms" if x < 10 else f"{x:.2f}s"


def _ratio(a: float | None, b: float | None) -> str:
    return "-" if a is None or not b else f"{a / b:.2f}x"


def print_table(title: str, rows: Sequence[Row], file: Any = None) -> None:
    """Print timings and the ratios reelstore/git and reelstore/dulwich as an aligned table."""
    out = file or sys.stdout
    header = ("name", "reelstore", "git", "dulwich", "reel/git", "reel/dulwich")
    body = [(n, _fmt(r), _fmt(g), _fmt(d), _ratio(r, g), _ratio(r, d)) for n, r, g, d in rows]
    widths = [max(len(row[i]) for row in [header, *body]) for i in range(len(header))]
    print(f"== {title}", file=out)
    for row in [header, *body]:
        cells = [row[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(row[1:], widths[1:])]
        print("  ".join(cells), file=out)
    out.flush()
