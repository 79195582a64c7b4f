"""Runs inside the command's fresh network namespace (started by `unshare -n`, from `sandbox.py`):
bring up the namespace's loopback, forward the proxy port to the capturing proxy outside over a Unix
socket, catch direct connections to the loopback targets the user allowed, run the command.

Standard library only, and run as a file (`python -I netns.py`), not as part of the package: it must
start fast and import nothing of the store. Usage:

    netns.py SOCKET PORT REPORT [--catch HOST:PORT]... -- CMD...

A caught connection is written to REPORT at once (one JSON line: where it went, when) and closed
without a byte read or sent. The exit status is the command's; a command killed by a signal kills
this process with the same signal, so the caller sees what a shell would.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable

SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
CHUNK = 64 * 1024
BACKLOG = 128


def loopback_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        req = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(s, SIOCGIFFLAGS, req))[1]
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | IFF_UP))


def pump(src: socket.socket, dst: socket.socket) -> None:
    """Copy `src` to `dst` until `src` ends, then half-close both: one direction of a forwarded connection."""
    try:
        while data := src.recv(CHUNK):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s, how in ((dst, socket.SHUT_WR), (src, socket.SHUT_RD)):
            try:
                s.shutdown(how)
            except OSError:
                pass


def _bridge(conn: socket.socket, path: str) -> None:
    out = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        out.connect(path)
    except OSError:
        conn.close()
        out.close()
        return
    back = threading.Thread(target=pump, args=(out, conn), daemon=True)
    back.start()
    pump(conn, out)
    back.join()
    conn.close()
    out.close()


def _listen(host: str, port: int) -> socket.socket | None:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        s = socket.socket(family, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((host, port))
        s.listen(BACKLOG)
    except OSError:
        return None
    return s


def _serve(listener: socket.socket, handle: Callable[[socket.socket], object]) -> None:
    while True:
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        threading.Thread(target=handle, args=(conn,), daemon=True).start()


def main(argv: list[str]) -> int:
    sock_path, port, report = argv[0], int(argv[1]), argv[2]
    rest = argv[3:]
    split = rest.index("--")
    catches = [rest[i + 1] for i in range(split) if rest[i] == "--catch"]
    cmd = rest[split + 1:]
    loopback_up()
    lock = threading.Lock()

    def caught(target: str) -> object:
        def handle(conn: socket.socket) -> None:
            conn.close()
            with lock, open(report, "a") as f:
                f.write(json.dumps({"target": target, "time": time.time()}) + "\n")
        return handle

    for host in ("127.0.0.1", "::1"):
        fwd = _listen(host, port)
        if fwd is not None:
            threading.Thread(target=_serve, args=(fwd, lambda c: _bridge(c, sock_path)), daemon=True).start()
    for spec in catches:
        host, _, p = spec.rpartition(":")
        for addr in ((host,) if host not in ("localhost",) else ("127.0.0.1", "::1")):
            s = _listen(addr.strip("[]"), int(p))
            if s is not None:
                threading.Thread(target=_serve, args=(s, caught(spec)), daemon=True).start()
    try:
        proc = subprocess.Popen(cmd)
    except OSError as exc:
        print(f"reel run: cannot run {cmd[0]!r}: {exc.strerror or exc}", file=sys.stderr)
        return 127 if isinstance(exc, FileNotFoundError) else 126
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda n, _f: proc.send_signal(n))
    status = proc.wait()
    if status < 0:
        signal.signal(-status, signal.SIG_DFL)
        os.kill(os.getpid(), -status)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
