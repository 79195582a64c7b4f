"""Fail closed: the command runs in its own user, network, mount and PID namespaces, where the only
reachable endpoint is the capturing proxy and the store does not exist.

`unshare --user --map-root-user --net --mount` (a user namespace always, root included: the command never
holds a capability over the host's namespaces, so `nsenter` into reel's own network namespace is refused)
gives the command a network of its own holding nothing but a loopback interface. Inside it, `netns.py`
listens on 127.0.0.1 (and ::1) at the proxy's port and forwards each connection over a Unix socket to
this process, which relays it to the real proxy on the host's loopback. A client that ignores the proxy
variables is captured all the same: the namespace's DNS stub gives every name an address of the
namespace's own, and a connection to it (port 80 or 443), or to a loopback target named with `--allow
HOST:PORT`, is tunnelled to the proxy as `CONNECT` (TLS by SNI) and reported in the notes. Any other
address is "network unreachable" (refused by the kernel, before any packet); a connection the bridge
cannot name is closed unanswered and reported as a blocked escape attempt, which makes the run not clean.

The store's `.reel` directory (config, hooks, refs, secrets, the CA key) and the bridge's own
directory are covered by an empty tmpfs inside the mount namespace, so `reel` inside finds no store
and no hook can be planted. The command itself runs in a PID namespace whose init is `netns.py`:
with no capability, no setuid gain and a seccomp filter (see `netns.confine`); when it exits, every
process it left behind is killed.

Where namespaces are unavailable `reel run` refuses (E014) unless told `--no-sandbox`.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from reelstore.backend.repo import Repo
from reelstore.errors import BadInput
from reelstore.intercept.acceptor import Acceptor
from reelstore.intercept.base import Backend, Launch
from reelstore.intercept.netns import pump
from reelstore.wording import plural

HELPER = Path(__file__).with_name("netns.py")


def unshare_argv() -> list[str] | None:
    """The `unshare` invocation that gives a new network namespace here, or None if none works."""
    exe = shutil.which("unshare")
    if exe is None:
        return None
    tie = [setpriv, "--pdeathsig", "KILL"] if (setpriv := shutil.which("setpriv")) else []
    argv = [*tie, exe, "--user", "--map-root-user", "--net", "--mount"]
    probe = [*argv, exe, "--pid", "--fork", "--kill-child", "--mount-proc", "true"]
    try:
        ok = subprocess.run(probe, capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        ok = False
    return argv if ok else None


def require_unshare() -> list[str]:
    argv = unshare_argv()
    if argv is None:
        raise BadInput(
            "reel run cannot give the command namespaces of its own here (`unshare --user --net "
            "--mount --pid` "
            "is missing or not permitted), so a client that ignores the proxy could send effects "
            "before any commit. Nothing was run. Use --no-sandbox to run without it, knowing that"
        )
    return argv


class Sandbox(Backend):
    name = "sandbox"

    def __init__(self, repo: Repo, view: str, unshare: list[str], catch: Iterable[str] = ()) -> None:
        super().__init__(repo, view)
        self.unshare = unshare
        self.catch = list(catch)
        self.blocked: list[dict[str, Any]] = []
        """Direct connections the command tried around the proxy that could not be tunnelled (closed)."""
        self.transparent: list[str] = []
        """Direct connections tunnelled to the proxy (captured like any other)."""
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._server: Acceptor | None = None
        self._port = 0

    def start(self, launch: Launch) -> None:
        if not launch.proxy_port:
            raise RuntimeError("the sandbox needs the proxy backend to start first")
        self._port = launch.proxy_port
        self._tmp = tempfile.TemporaryDirectory(prefix="reel-run-ns-")
        tmp = Path(self._tmp.name)
        os.chmod(tmp, 0o700)
        sock = tmp / "proxy.sock"
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(str(sock))
        server.listen(128)
        self._server = Acceptor(server, self._accepted, "reel-run-bridge")
        report = tmp / "blocked.jsonl"
        report.touch()
        resolv = tmp / "resolv.conf"
        resolv.write_text("nameserver 127.0.0.1\noptions attempts:1 timeout:2\n")
        resolv.chmod(0o644)
        catches = [a for spec in self.catch for a in ("--catch", spec)]
        hides = ["--hide", str(tmp)] + (["--hide", str(self.repo.path)] if self.repo.path is not None else [])
        launch.prefix = [
            *self.unshare,
            sys.executable,
            "-I",
            str(HELPER),
            str(sock),
            str(self._port),
            str(report),
            *catches,
            *hides,
            "--resolv",
            str(resolv),
            "--",
        ]

    def _accepted(self, conn: socket.socket) -> None:
        threading.Thread(target=self._relay, args=(conn,), daemon=True).start()

    def _relay(self, conn: socket.socket) -> None:
        try:
            up = socket.create_connection(("127.0.0.1", self._port), timeout=30)
        except OSError:
            conn.close()
            return
        up.settimeout(None)
        up.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as netns._serve's side: no delayed-ACK wait
        back = threading.Thread(target=pump, args=(up, conn), daemon=True)
        back.start()
        pump(conn, up)
        back.join()
        conn.close()
        up.close()

    def finish(self) -> None:
        assert self._tmp is not None, "the sandbox is not started"
        for line in (Path(self._tmp.name) / "blocked.jsonl").read_text().splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if entry.get("how") == "tunnelled":
                self.transparent.append(str(entry.get("target")))
                continue
            self.blocked.append(
                {
                    "target": str(entry.get("target")),
                    "message": "a direct connection around the proxy; closed, nothing was sent",
                }
            )
        if self.transparent:
            shown = ", ".join(sorted(set(self.transparent)))
            self.notes.append(
                f"{plural(len(self.transparent), 'connection')} ignored the proxy variables and "
                f"{'was' if len(self.transparent) == 1 else 'were'} captured "
                f"through the proxy all the same: {shown}"
            )
        self.close()

    def close(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None
