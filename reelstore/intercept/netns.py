"""Runs inside the command's fresh user, network and mount namespaces (started by `unshare`, from
`sandbox.py`): bring up the namespace's loopback, hide the store, forward the proxy port to the
capturing proxy outside over a Unix socket, catch direct connections to the loopback targets the user
allowed, and run the command in a PID namespace of its own, confined.

Standard library only, and run as a file (`python -I netns.py`), not as part of the package: it must
start fast and import nothing of the store. Usage:

    netns.py SOCKET PORT REPORT [--catch HOST:PORT]... [--hide DIR]... [--resolv FILE] -- CMD...

Clients that ignore the proxy variables are captured transparently, like those that use them: the
namespace's own DNS stub (127.0.0.1:53, named in a `resolv.conf` bound over the real one) answers
every name with an address of its own in 198.18.0.0/15, a range made local to the namespace's
loopback, where listeners on ports 80 and 443 take the connection; it is handed to the proxy as a
`CONNECT NAME:PORT` tunnel (the proxy then reads the TLS SNI or the HTTP request inside it, as for
any client). A direct connection to a loopback target named with `--catch` (the `--allow` targets)
is tunnelled the same way to that target. Every other address has no route: nothing else leaves.

Each `--hide` directory (the store's `.reel`, this run's own bridge directory) is covered with an
empty, read-only tmpfs before the command starts, so nothing inside can read or change it. The
command then runs as `netns.py --init STATUS_FD -- CMD` under `unshare --pid --fork --mount-proc`:
that process is the namespace's init, forks the command confined (no capability, no setuid gain, a
seccomp filter refusing namespace, mount and ptrace calls and Unix-domain sockets), reaps every
orphan, and when the command exits writes its wait status to STATUS_FD and exits; the kernel then
kills whatever the command left behind (a `setsid` daemon included).

Each such connection is written to REPORT at once (one JSON line: where it went, when, and whether
it was tunnelled to the proxy or, when no name is known for its address, closed unanswered). The
exit status is the command's; a command killed by a signal kills this process with the same signal,
so the caller sees what a shell would.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import json
import os
import platform
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable

SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
SIOCSIFADDR, SIOCSIFNETMASK = 0x8916, 0x891C
MS_BIND = 0x1000
FAKE_NET, FAKE_MASK = "198.18.0.0", "255.254.0.0"
"""The namespace's DNS stub answers names with addresses from here (a benchmarking range, never a real
host's); the namespace's loopback owns the whole range."""
HEAD_LIMIT = 16 * 1024
CHUNK = 64 * 1024
BACKLOG = 128
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 0x1, 0x2, 0x4, 0x8
PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, PR_CAP_AMBIENT = 24, 38, 22, 47
PR_CAP_AMBIENT_CLEAR_ALL, SECCOMP_MODE_FILTER = 4, 2
CLONE_NEW_ANY = 0x7E020000
"""CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET."""

# Syscall numbers per architecture: (audit arch, {name: number}).
SYSCALLS = {
    "x86_64": (
        0xC000003E,
        {
            "ptrace": 101,
            "mount": 165,
            "umount2": 166,
            "pivot_root": 155,
            "unshare": 272,
            "setns": 308,
            "socket": 41,
            "clone": 56,
            "clone3": 435,
            "open_tree": 428,
            "move_mount": 429,
            "fsopen": 430,
            "fsconfig": 431,
            "fsmount": 432,
            "fspick": 433,
            "mount_setattr": 442,
        },
    ),
    "aarch64": (
        0xC00000B7,
        {
            "ptrace": 117,
            "mount": 40,
            "umount2": 39,
            "pivot_root": 41,
            "unshare": 97,
            "setns": 268,
            "socket": 198,
            "clone": 220,
            "clone3": 435,
            "open_tree": 428,
            "move_mount": 429,
            "fsopen": 430,
            "fsconfig": 431,
            "fsmount": 432,
            "fspick": 433,
            "mount_setattr": 442,
        },
    ),
}
DENIED = (
    "ptrace",
    "mount",
    "umount2",
    "pivot_root",
    "unshare",
    "setns",
    "open_tree",
    "move_mount",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
)

_libc = ctypes.CDLL(None, use_errno=True)
_libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def loopback_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        req = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(s, SIOCGIFFLAGS, req))[1]
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | IFF_UP))


def fake_range_up() -> None:
    """Make 198.18.0.0/15 local on `lo` (an alias address with that prefix: on a loopback device the
    kernel routes the whole prefix locally)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for req, addr in ((SIOCSIFADDR, "198.18.0.1"), (SIOCSIFNETMASK, FAKE_MASK)):
            packed = struct.pack("16sH2s4s8x", b"lo:reel", socket.AF_INET, b"\0\0", socket.inet_aton(addr))
            fcntl.ioctl(s, req, packed)


class Names:
    """The DNS stub's answers: one address per name, and the name behind each address."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_name: dict[str, str] = {}
        self._by_addr: dict[str, str] = {}
        self._next = struct.unpack("!I", socket.inet_aton(FAKE_NET))[0] + 2

    def address(self, name: str) -> str:
        with self._lock:
            if name not in self._by_name:
                addr = socket.inet_ntoa(struct.pack("!I", self._next))
                self._next += 1
                self._by_name[name], self._by_addr[addr] = addr, name
            return self._by_name[name]

    def name(self, addr: str) -> str | None:
        with self._lock:
            return self._by_addr.get(addr)


def dns_answer(query: bytes, names: Names) -> bytes | None:
    """The reply to one DNS query: an A record from `names` for an A question, no record (NOERROR) for
    any other type; None for what is not a single-question query."""
    if len(query) < 12 or struct.unpack("!H", query[4:6])[0] != 1:
        return None
    labels, i = [], 12
    while i < len(query) and query[i]:
        n = query[i]
        if n > 63 or i + 1 + n > len(query):
            return None
        labels.append(query[i + 1 : i + 1 + n].decode("ascii", "replace").lower())
        i += 1 + n
    if i + 5 > len(query):
        return None
    question = query[12 : i + 5]
    qtype = struct.unpack("!H", query[i + 1 : i + 3])[0]
    flags = 0x8180 | (struct.unpack("!H", query[2:4])[0] & 0x0100)  # response, RA, RD as asked
    if qtype != 1 or not labels:
        return query[:2] + struct.pack("!HHHHH", flags, 1, 0, 0, 0) + question
    addr = socket.inet_aton(names.address(".".join(labels)))
    answer = b"\xc0\x0c" + struct.pack("!HHIH", 1, 1, 5, 4) + addr
    return query[:2] + struct.pack("!HHHHH", flags, 1, 1, 0, 0) + question + answer


def _dns(server: socket.socket, names: Names) -> None:
    while True:
        try:
            query, peer = server.recvfrom(4096)
        except OSError:
            return
        reply = dns_answer(query, names)
        if reply is not None:
            try:
                server.sendto(reply, peer)
            except OSError:
                pass


def tunnel(conn: socket.socket, path: str, host: str, port: int) -> None:
    """Hand a connection that ignored the proxy to it as `CONNECT host:port`, then relay both ways."""
    out = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        out.connect(path)
        shown = f"[{host}]" if ":" in host else host
        out.sendall(f"CONNECT {shown}:{port} HTTP/1.1\r\nHost: {shown}:{port}\r\n\r\n".encode())
        head = b""
        while b"\r\n\r\n" not in head and len(head) < HEAD_LIMIT:
            chunk = out.recv(4096)
            if not chunk:
                break
            head += chunk
        if not head.startswith((b"HTTP/1.1 200", b"HTTP/1.0 200")) or b"\r\n\r\n" not in head:
            raise OSError("the proxy refused the tunnel")
    except OSError:
        conn.close()
        out.close()
        return
    _splice(conn, out)


def hide(path: str) -> None:
    """Cover `path` with an empty read-only tmpfs that no one inside may list (mode 000)."""
    _check(
        _libc.mount(
            b"tmpfs", os.fsencode(path), b"tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, b"mode=000,size=4k"
        ),
        f"cannot hide {path}",
    )


def seccomp_filter() -> bytes | None:
    """A classic-BPF seccomp program for this machine's architecture, or None if it is not known.

    Namespace, mount and ptrace calls fail with EPERM, `clone` with any CLONE_NEW* flag too, `clone3`
    with ENOSYS (its flags are out of a filter's reach; libc falls back to `clone`), `socket(AF_UNIX)`
    with EPERM (host services listening on filesystem sockets stay out of reach; `socketpair` still
    works), and any call made through a foreign ABI (i386, x32) with EPERM."""
    known = SYSCALLS.get(platform.machine())
    if known is None:
        return None
    arch, nr = known
    allow, eperm, enosys = 0x7FFF0000, 0x00050000 | errno.EPERM, 0x00050000 | errno.ENOSYS
    prog: list[tuple[int, int, int, int | str]] = []  # (code, jt, jf, k); jt/jf may be labels

    def ld(offset: int) -> None:
        prog.append((0x20, 0, 0, offset))

    def jeq(k: int, label: str) -> None:
        prog.append((0x15, label, 0, k))  # type: ignore[arg-type]

    def ret(k: int) -> None:
        prog.append((0x06, 0, 0, k))

    ld(4)
    prog.append((0x15, 1, 0, arch))
    ret(eperm)
    ld(0)
    prog.append((0x35, "eperm", 0, 0x40000000))  # type: ignore[arg-type]  # x32 ABI bit
    for name in DENIED:
        jeq(nr[name], "eperm")
    jeq(nr["clone3"], "enosys")
    jeq(nr["socket"], "socket")
    jeq(nr["clone"], "clone")
    ret(allow)
    labels = {"socket": len(prog)}
    ld(16)
    prog.append((0x15, "eperm", 0, socket.AF_UNIX))  # type: ignore[arg-type]
    ret(allow)
    labels["clone"] = len(prog)
    ld(16)
    prog.append((0x45, "eperm", 0, CLONE_NEW_ANY))  # type: ignore[arg-type]
    ret(allow)
    labels["eperm"] = len(prog)
    ret(eperm)
    labels["enosys"] = len(prog)
    ret(enosys)
    out = b""
    for i, (code, jt, jf, k) in enumerate(prog):
        tt = labels[jt] - i - 1 if isinstance(jt, str) else jt
        out += struct.pack("HBBI", code, tt, jf, k)
    return out


def confine() -> None:
    """Make this process (about to exec the command) hold no capability, gain none through setuid
    files or file capabilities, and be refused the calls that reach beyond the sandbox."""
    cap = 0
    while _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == 0:
        cap += 1
    _libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    prog = seccomp_filter()
    if prog is None:
        return
    filt = ctypes.create_string_buffer(prog, len(prog))
    fprog = struct.pack("HxxxxxxQ", len(prog) // 8, ctypes.addressof(filt))
    buf = ctypes.create_string_buffer(fprog, len(fprog))
    _check(_libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(buf), 0, 0), "seccomp")


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


def _splice(conn: socket.socket, out: socket.socket) -> None:
    """Copy both ways between two connected sockets until both sides are done, then close them."""
    back = threading.Thread(target=pump, args=(out, conn), daemon=True)
    back.start()
    pump(conn, out)
    back.join()
    conn.close()
    out.close()


def _bridge(conn: socket.socket, path: str) -> None:
    out = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        out.connect(path)
    except OSError:
        conn.close()
        out.close()
        return
    _splice(conn, out)


def _listen(host: str, port: int, any_address: bool = False) -> socket.socket | None:
    """A listener on host:port; with `any_address`, on every local IPv4 address of the port (0.0.0.0):
    the stub's addresses and loopback alike."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        s = socket.socket(family, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("0.0.0.0" if any_address else host, port))
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
        if conn.family in (socket.AF_INET, socket.AF_INET6):
            # A relay writes a request's head and body apart: without this the body waits for the
            # peer's delayed ACK, ~40 ms on every model call (bench/bench_model_proxy.py).
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=handle, args=(conn,), daemon=True).start()


def init(status_fd: int, cmd: list[str]) -> int:
    """The PID namespace's first process: start the command confined, reap every process, report the
    command's wait status on `status_fd`. Its exit ends the namespace and everything left in it."""
    try:
        pid = os.fork()
    except OSError as exc:
        print(f"reel run: cannot start {cmd[0]!r}: {exc}", file=sys.stderr)
        return 126
    if pid == 0:
        try:
            os.close(status_fd)
            confine()
            os.execvp(cmd[0], cmd)
        except OSError as exc:
            print(f"reel run: cannot run {cmd[0]!r}: {exc.strerror or exc}", file=sys.stderr)
            os._exit(127 if isinstance(exc, FileNotFoundError) else 126)
        os._exit(126)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda n, _f: os.kill(pid, n))
    while True:
        try:
            done, status = os.wait()
        except ChildProcessError:
            return 126
        except InterruptedError:
            continue
        if done == pid:
            os.write(status_fd, str(status).encode())
            return 0


def main(argv: list[str]) -> int:
    if argv[0] == "--init":
        return init(int(argv[1]), argv[3:])
    sock_path, port, report = argv[0], int(argv[1]), argv[2]
    rest = argv[3:]
    split = rest.index("--")
    catches = [rest[i + 1] for i in range(split) if rest[i] == "--catch"]
    hidden = [rest[i + 1] for i in range(split) if rest[i] == "--hide"]
    resolv = [rest[i + 1] for i in range(split) if rest[i] == "--resolv"]
    cmd = rest[split + 1 :]
    loopback_up()
    fake_range_up()
    for conf in resolv:  # before the hiding: the file lives in a hidden directory
        target = os.path.realpath("/etc/resolv.conf")
        if os.path.exists(target):
            _check(_libc.mount(os.fsencode(conf), os.fsencode(target), None, MS_BIND, None), "resolv.conf")
    # The bridge directory is hidden below: reach its socket and report through descriptors opened now.
    bridge_dir = os.open(os.path.dirname(sock_path), os.O_PATH | os.O_DIRECTORY)
    sock_path = f"/proc/self/fd/{bridge_dir}/{os.path.basename(sock_path)}"
    report_fd = os.open(report, os.O_WRONLY | os.O_APPEND)
    for path in hidden:
        hide(path)
    lock = threading.Lock()
    names = Names()

    def note(target: str, how: str) -> None:
        with lock:
            os.write(report_fd, (json.dumps({"target": target, "how": how, "time": time.time()}) + "\n").encode())

    def caught(host: str, p: int) -> Callable[[socket.socket], None]:
        def handle(conn: socket.socket) -> None:
            note(f"{host}:{p}", "tunnelled")
            tunnel(conn, sock_path, host, p)

        return handle

    def redirected(p: int) -> Callable[[socket.socket], None]:
        def handle(conn: socket.socket) -> None:
            addr = conn.getsockname()[0]
            name = names.name(addr) or (addr if addr.startswith("127.") else None)
            if name is None:
                note(f"{addr}:{p}", "closed")
                conn.close()
                return
            note(f"{name}:{p}", "tunnelled")
            tunnel(conn, sock_path, name, p)

        return handle

    for web in (80, 443):
        s = _listen(FAKE_NET, web, any_address=True)
        if s is not None:
            threading.Thread(target=_serve, args=(s, redirected(web)), daemon=True).start()
    for host in ("127.0.0.1", "::1"):
        fwd = _listen(host, port)
        if fwd is not None:
            threading.Thread(target=_serve, args=(fwd, lambda c: _bridge(c, sock_path)), daemon=True).start()
    for spec in catches:
        host, _, text = spec.rpartition(":")
        for addr in (host,) if host not in ("localhost",) else ("127.0.0.1", "::1"):
            s = _listen(addr.strip("[]"), int(text))
            if s is not None:
                threading.Thread(target=_serve, args=(s, caught(host.strip("[]"), int(text))), daemon=True).start()
    dns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    dns.bind(("127.0.0.1", 53))
    threading.Thread(target=_dns, args=(dns, names), daemon=True).start()
    read, write = os.pipe()
    unshare = shutil.which("unshare") or "unshare"
    # Tied to this process: if it is killed, the PID namespace and everything in it die with it.
    tie = [exe, "--pdeathsig", "KILL"] if (exe := shutil.which("setpriv")) else []
    proc = subprocess.Popen(
        [
            *tie,
            unshare,
            "--pid",
            "--fork",
            "--kill-child",
            "--mount-proc",
            sys.executable,
            "-I",
            os.path.abspath(__file__),
            "--init",
            str(write),
            "--",
            *cmd,
        ],
        pass_fds=(write,),
    )
    os.close(write)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda n, _f: proc.send_signal(n))
    told = b""
    while chunk := os.read(read, 64):
        told += chunk
    proc.wait()
    if not told:
        return proc.returncode if proc.returncode >= 0 else 128 - proc.returncode
    status = int(told)
    if os.WIFSIGNALED(status):
        signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
        os.kill(os.getpid(), os.WTERMSIG(status))
    return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
