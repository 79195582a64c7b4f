"""Named crash points: the one place tests and the simulator make a process die between two steps.

A real crash test sets `REEL_TEST_CRASH_AT=<point>[,<point>…]` in a `reel` subprocess; reaching a
listed point kills the process with SIGKILL, exactly like a power cut (no cleanup, no finally blocks).
The in-process simulator installs a hook instead, which raises to unwind a simulated process.
Unset, a crash point costs one environment lookup.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager

ENV = "REEL_TEST_CRASH_AT"

_hook: Callable[[str], None] | None = None


def crash_point(name: str) -> None:
    """Die here if this point is armed (by the environment or by an installed hook)."""
    if _hook is not None:
        _hook(name)
    armed = os.environ.get(ENV)
    if armed and name in armed.split(","):
        import signal  # only a crash test arms a point: nothing else pays for the module

        os.kill(os.getpid(), signal.SIGKILL)


def set_hook(hook: Callable[[str], None] | None) -> Callable[[str], None] | None:
    """Install (or clear, with None) the in-process hook; returns the previous one so callers can restore it."""
    global _hook
    previous, _hook = _hook, hook
    return previous


@contextmanager
def hooked(hook: Callable[[str], None]) -> Iterator[None]:
    """Run the block with `hook` installed, then put back whatever was installed before."""
    previous = set_hook(hook)
    try:
        yield
    finally:
        set_hook(previous)
