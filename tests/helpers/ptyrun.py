"""Run a real `reel` with some of its standard streams on a pseudo-terminal, as a person would see it."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from conftest import REEL


@dataclass
class Seen:
    returncode: int
    terminal: bytes  # everything written to the pseudo-terminal
    stdout: bytes  # stdout, when it was not the terminal
    stderr: bytes  # stderr, when it was not the terminal


def run(
    *args: str,
    cwd: Path,
    on_tty: tuple[str, ...] = ("stderr",),
    env: dict[str, str] | None = None,
    timeout: float = 120.0,
) -> Seen:
    """`reel ARGS` with the streams named in `on_tty` on one pseudo-terminal (the others piped), read
    until the process ends or `timeout` seconds pass (then it is killed and the test fails)."""
    unset = ("REEL_DIR", "NO_COLOR", "PAGER", "REEL_PAGER", "LESS", "LV", "COLUMNS", "TERM")
    full = {k: v for k, v in os.environ.items() if k not in unset}
    full.update(env or {})
    primary, secondary = pty.openpty()
    streams = {name: secondary if name in on_tty else subprocess.PIPE for name in ("stdin", "stdout", "stderr")}
    if "stdin" not in on_tty:
        streams["stdin"] = subprocess.DEVNULL
    proc = subprocess.Popen([REEL, *args], cwd=cwd, env=full, **streams)  # type: ignore[call-overload]
    os.close(secondary)
    seen = b""
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([primary], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(primary, 65536)
                except OSError:  # EIO: every holder of the terminal's other end has closed it
                    break
                if not chunk:
                    break
                seen += chunk
            elif proc.poll() is not None:
                break
        else:
            proc.kill()
            raise AssertionError(f"reel {' '.join(args)} still running after {timeout} s; it wrote {seen!r}")
        out, err = proc.communicate(timeout=timeout)
    finally:
        os.close(primary)
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    return Seen(proc.returncode, seen, out or b"", err or b"")
