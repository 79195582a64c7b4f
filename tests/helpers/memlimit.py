"""Run a real `reel` under an address-space limit and report its peak resident memory.

The limit (`resource.setrlimit(RLIMIT_AS)`) makes a run that tries to hold gigabytes fail outright;
the peak RSS (`ru_maxrss` of the child, read by a small wrapper process) is what the tests assert on,
since mapped pack files count toward address space but need not be resident."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from conftest import REEL

MiB = 1 << 20

_WRAPPER = r"""
import resource, subprocess, sys
limit = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
code = subprocess.call(sys.argv[2:])
sys.stderr.write("\nMAXRSS %d\n" % resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
sys.exit(code)
"""


@dataclass
class Measured:
    returncode: int
    stderr: str
    maxrss: int
    """Peak resident set of the command, in bytes."""


def run_reel(
    cwd: Path,
    *args: str,
    limit: int = 1536 * MiB,
    stdin: IO[bytes] | None = None,
    stdout: IO[bytes] | None = None,
    timeout: float = 300,
) -> Measured:
    """`reel ARGS` in `cwd` under an address-space `limit`; stdout goes to `stdout` (default: discarded)."""
    env = dict(os.environ)
    env.pop("REEL_DIR", None)
    proc = subprocess.run(
        [sys.executable, "-c", _WRAPPER, str(limit), REEL, *args],
        cwd=cwd,
        env=env,
        stdin=stdin if stdin is not None else subprocess.DEVNULL,
        stdout=stdout if stdout is not None else subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        timeout=timeout,
    )
    err = proc.stderr.decode("utf-8", "replace")
    body, _, tail = err.rstrip().rpartition("\nMAXRSS ")
    assert tail.isdigit(), f"the wrapper did not report memory: {err[-2000:]}"
    return Measured(proc.returncode, body, int(tail) * 1024)
