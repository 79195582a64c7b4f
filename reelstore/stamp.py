"""Who acts and when: the principal and the clock every record, reflog entry and log line carries."""

from __future__ import annotations

import os
import time


def now_ms() -> int:
    """Wall-clock time in milliseconds since the epoch."""
    return int(time.time() * 1000)


def principal() -> str:
    """Who acts: REEL_PRINCIPAL, else the login name."""
    return os.environ.get("REEL_PRINCIPAL") or os.environ.get("USER") or "reel"
