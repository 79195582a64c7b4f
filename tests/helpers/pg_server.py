"""A private PostgreSQL server for the test session: its own cluster in a temporary directory, listening
on a reserved loopback port and a private socket directory, stopped at the end.

PostgreSQL refuses to run as root and CI runs as root: then the cluster belongs to an unprivileged user
(created if missing) and initdb/pg_ctl run as that user. Every test that wants a clean slate asks for a
fresh database (`PgServer.fresh_url`). Nothing here skips: a server that cannot start fails the test.
"""

from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from ports import Reserved

USER = "reelpg"
"""The cluster's owner and superuser when the tests run as root (otherwise the current user)."""

_WATCHDOG = """
import os, shutil, subprocess, sys, time
parent, root, stop = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
for _ in range(4320):  # six hours at most
    try:
        os.kill(parent, 0)
    except ProcessLookupError:
        break
    time.sleep(5)
else:
    sys.exit(0)
subprocess.run(stop, capture_output=True, timeout=60)
shutil.rmtree(root, ignore_errors=True)
"""
"""Stops the cluster and removes its directory if the test process dies without doing it (a killed or
timed-out run): the machine is shared, and a forgotten server would keep running."""


def _bin_dir() -> Path:
    """Where initdb/pg_ctl live: on PATH, else Debian's versioned directory (the newest)."""
    found = shutil.which("initdb")
    if found:
        return Path(found).parent
    dirs = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda d: int(Path(d).parent.name))
    for d in reversed(dirs):
        if (Path(d) / "initdb").exists():
            return Path(d)
    raise RuntimeError(
        "PostgreSQL is not installed: no initdb on PATH nor in /usr/lib/postgresql/*/bin "
        "(.ci/run installs the Debian package `postgresql`)"
    )


def _owner() -> str:
    """The user the cluster runs as: the current one, or USER (created if missing) under root."""
    if os.geteuid() != 0:
        return pwd.getpwuid(os.geteuid()).pw_name
    try:
        pwd.getpwnam(USER)
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/bin/sh", USER],
            check=True,
            capture_output=True,
            timeout=30,
        )
    return USER


class PgServer:
    """One running cluster; `url(db)` names a database on it, `fresh_url()` creates an empty one."""

    def __init__(self) -> None:
        self.bin = _bin_dir()
        self.user = _owner()
        self.root = Path(tempfile.mkdtemp(prefix="reelpg-"))
        self.data = self.root / "data"
        self.sock = self.root / "sock"
        self.log = self.root / "server.log"
        self.sock.mkdir()
        if os.geteuid() == 0:
            entry = pwd.getpwnam(self.user)
            for p in (self.root, self.sock):
                os.chown(p, entry.pw_uid, entry.pw_gid)
        self._port = Reserved()
        self.port = self._port.port
        self._run("initdb", "-D", str(self.data), "-U", self.user, "--auth=trust", "-E", "UTF8", "--no-sync")
        self.start()
        stop = self._as_owner([str(self.bin / "pg_ctl"), "-D", str(self.data), "-w", "-m", "immediate", "stop"])
        self._watchdog = subprocess.Popen(
            [sys.executable, "-c", _WATCHDOG, str(os.getpid()), str(self.root), *stop],
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def _as_owner(self, argv: list[str]) -> list[str]:
        if os.geteuid() != 0:
            return argv
        entry = pwd.getpwnam(self.user)
        return ["setpriv", f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}", "--clear-groups", *argv]

    def _run(self, tool: str, *args: str) -> None:
        proc = subprocess.run(
            self._as_owner([str(self.bin / tool), *args]), capture_output=True, timeout=120, cwd=self.root
        )
        if proc.returncode != 0:
            log = self.log.read_text(errors="replace")[-4000:] if self.log.exists() else ""
            raise RuntimeError(
                f"{tool} {' '.join(args)} exited {proc.returncode}: "
                f"{proc.stdout.decode(errors='replace')}{proc.stderr.decode(errors='replace')}"
                f"\n--- server log ---\n{log}"
            )

    def start(self) -> None:
        # fsync off: only the server process is ever killed in the tests, never the machine, so the page
        # cache keeps every committed write and the shared 2-core machine is spared the disk flushes.
        opts = f"-p {self.port} -k {self.sock} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200"
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60", "-o", opts, "start")

    def stop(self, mode: str = "fast") -> None:
        """Stop the server; mode `immediate` is a crash (no checkpoint, recovery at the next start)."""
        self._run("pg_ctl", "-D", str(self.data), "-w", "-t", "60", "-m", mode, "stop")

    def restart(self, mode: str = "fast") -> None:
        """Stop and start again on the same port and data: committed rows survive, connections do not."""
        self.stop(mode)
        self.start()

    def url(self, db: str = "postgres") -> str:
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{db}"

    def fresh_url(self) -> str:
        """Create an empty database and return its URL."""
        import psycopg

        name = f"t_{secrets.token_hex(6)}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def close(self) -> None:
        self._watchdog.kill()
        self._watchdog.wait(timeout=30)
        try:
            self.stop("immediate")
        finally:
            self._port.close()
            shutil.rmtree(self.root, ignore_errors=True)
