"""Real git on loopback for the sync tests: bare repositories and a `git daemon` with receive-pack."""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

GIT_ENV = {"GIT_CONFIG_NOSYSTEM": "1", "HOME": "/nonexistent", "PATH": "/usr/local/bin:/usr/bin:/bin",
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}


def git(*args: str, cwd: Path | None = None, input: bytes | None = None) -> str:
    """Run git, fail loudly, return stdout."""
    proc = subprocess.run(["git", *args], cwd=cwd, input=input, capture_output=True, timeout=60, env=GIT_ENV)
    if proc.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} exited {proc.returncode}: {proc.stderr.decode()}")
    return proc.stdout.decode()


def bare(path: Path) -> Path:
    git("init", "-q", "--bare", str(path))
    return path


def fsck(path: Path) -> str:
    """`git fsck --strict` on a bare repository; raises if git finds anything wrong."""
    return git("--git-dir", str(path), "fsck", "--strict", "--no-dangling")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class GitDaemon:
    """`git daemon` serving every repository under `base`, push enabled, on 127.0.0.1."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.port = free_port()
        self.proc: subprocess.Popen | None = None

    def url(self, name: str) -> str:
        return f"git://127.0.0.1:{self.port}/{name}"

    def start(self) -> GitDaemon:
        self.proc = subprocess.Popen(
            ["git", "daemon", "--reuseaddr", f"--base-path={self.base}", "--export-all", "--enable=receive-pack",
             "--informative-errors", "--listen=127.0.0.1", f"--port={self.port}", str(self.base)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=GIT_ENV)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"git daemon exited with {self.proc.returncode}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return self
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise AssertionError("git daemon did not start listening within 10 s")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
