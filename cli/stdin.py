"""Standard input for commands that take data of any size: copied out a MiB at a time."""

from __future__ import annotations

import sys
from typing import IO


def spool_stdin(out: IO[bytes]) -> int:
    """Copy standard input to `out`; the number of bytes copied."""
    source = sys.stdin.buffer
    total = 0
    while piece := source.read(1 << 20):
        out.write(piece)
        total += len(piece)
    return total
