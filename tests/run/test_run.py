"""`reel run`, the dry-run loop, end to end: the real `reel` runs a real command (a Python subprocess)
whose plain-HTTP requests go through the capturing proxy to a real target on 127.0.0.1 (named with
`--allow`), and whose file changes in the scratch directory become the view's writes. HTTPS, the
sandbox and secrets: test_run_tls.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import REEL
from target import Target

from reelstore import Store
from reelstore.errors import Conflict
from reelstore.intercept.base import Launch
from reelstore.intercept.http_proxy import HttpProxy
from reelstore.intercept.loop import DryRun
from reelstore.porcelain.run import DECLINED_EXIT

CLIENT = textwrap.dedent("""
    import json, os, sys, urllib.error, urllib.request
    base, ledger = sys.argv[1], sys.argv[2]
    got = urllib.request.urlopen(base + "/hello", timeout=20)
    print("GET", got.status, got.read().decode())
    req = urllib.request.Request(base + "/keyed/pay", data=b'{"amount": 5}', method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        resp = urllib.request.urlopen(req, timeout=20)
        doc = json.loads(resp.read())
        print("POST", resp.status, resp.headers["Reel-Effect"], doc["effect"])
    except urllib.error.HTTPError as err:
        print("POST", err.code, json.loads(err.read())["error"]["code"])
    # the captured POST must not have reached the target while the command runs
    print("LEDGER", len(open(ledger).read().splitlines()))
""")

FILES = textwrap.dedent("""
    import os
    open("docs/new.txt", "w").write("written by the command")
    os.remove("docs/old.txt")
    print("FILES", sorted(os.listdir("docs")), os.environ["REEL_SCRATCH"] == os.getcwd())
""")


@pytest.fixture
def target(tmp_path: Path):
    with Target(tmp_path / "ledger.jsonl") as t:
        yield t


@pytest.fixture
def store(tmp_path: Path, target: Target):
    """A store whose trunk holds docs/old.txt and docs/keep.txt, with a keyed service rule for /keyed.
    Set up through the Python API (the same kernel `reel` runs) to keep the test fast."""
    s = Store.init(tmp_path)
    s.repo.config.set("service.keyed.match", f"http:POST:{target.url}/keyed")
    s.repo.config.set("service.keyed.delivery", "keyed")
    s.repo.config.save()
    with s.view("setup") as v:
        v.put("docs/old.txt", b"old")
        v.put("docs/keep.txt", b"keep")
    (tmp_path / "client.py").write_text(CLIENT)
    (tmp_path / "files.py").write_text(FILES)
    return tmp_path


def client(store: Path, target: Target) -> list[str]:
    return [sys.executable, str(store / "client.py"), target.url, str(target.ledger_path)]


def allow(target: Target) -> list[str]:
    """The target is on this machine's loopback: the run may reach it only when told so."""
    return ["--allow", target.url.removeprefix("http://")]


def trunk_names(reel) -> dict[str, str]:
    out = reel("ls-tree", "-r", "main", check=True).stdout.decode().split("\n")
    return {name: head.split()[2] for head, name in (line.split("\t", 1) for line in out if line)}


def test_get_passes_through_post_is_captured_and_fires_once_on_commit(store, reel, target):
    proc = reel("run", *allow(target), "--view", "agent", "--commit", "--", *client(store, target), check=True)
    out = proc.stdout.decode()
    assert "GET 200 ok" in out, out
    line = next(x for x in out.splitlines() if x.startswith("POST "))
    _, status, header, body_id = line.split()
    assert status == "202" and header == body_id
    assert "LEDGER 0" in out
    assert f"POST {target.url}/keyed/pay  class C  keyed" in out
    assert "decision: commit (--commit)" in out
    assert target.count("/keyed/pay") == 1
    entry = target.ledger()[0]
    assert entry["body"] == '{"amount": 5}' and entry["key"].startswith("op_")
    top = Store.open(store).log()[0]
    assert top.view == "agent" and len(top.effects) == 1


def test_abort_sends_nothing_and_gc_collects_the_effect(store, reel, target):
    proc = reel("--json", "run", *allow(target), "--abort", "--", *client(store, target), check=True)
    doc = json.loads(proc.stdout)
    assert doc["decision"] == "abort" and doc["reason"] == "--abort"
    assert "GET 200 ok" in proc.stderr.decode()
    [effect] = doc["effects"]
    assert (effect["method"], effect["url"], effect["delivery"]) == ("POST", f"{target.url}/keyed/pay", "keyed")
    assert doc["passed"] == [{"method": "GET", "url": f"{target.url}/hello", "status": 200}]
    assert target.ledger() == []
    assert reel("cat-file", "-e", effect["id"]).returncode == 0
    reel("gc", "--prune=now", check=True)
    assert reel("cat-file", "-e", effect["id"]).returncode == 4
    assert target.ledger() == []


def test_scratch_changes_land_on_commit(store, reel):
    proc = reel("run", "--commit", "--dir", "docs/", "--", sys.executable, str(store / "files.py"), check=True)
    out = proc.stdout.decode()
    assert "FILES ['keep.txt', 'new.txt'] True" in out
    assert "removed   docs/old.txt" in out and "added     docs/new.txt" in out
    assert sorted(trunk_names(reel)) == ["docs/keep.txt", "docs/new.txt"]
    check = Store.open(store).fork("check")
    assert check.get("docs/new.txt") == b"written by the command"


def test_scratch_changes_vanish_on_abort(store, reel):
    before = Store.open(store).log()[0].record
    proc = reel("run", "--abort", "--", sys.executable, str(store / "files.py"), check=True)
    assert "decision: abort (--abort)" in proc.stdout.decode()
    assert Store.open(store).log()[0].record == before
    assert Store.open(store).views() == []


def test_no_terminal_and_no_flag_aborts(store, reel, target):
    proc = reel("run", *allow(target), "--view", "unasked", "--", *client(store, target))
    assert proc.returncode == DECLINED_EXIT == 1, proc.stderr
    assert "no terminal to ask and neither --commit nor --abort given" in proc.stdout.decode()
    assert target.ledger() == []
    assert Store.open(store).views() == []


def test_capability_refusal_answers_403_and_queues_nothing(store, reel, target):
    caps = ["--cap", "read,write,delete=", "--cap", f"fire_c=http:POST:{target.url}/other"]
    proc = reel("--json", "run", *allow(target), *caps, "--commit", "--", *client(store, target))
    assert proc.returncode == 6, proc.stderr
    assert "POST 403 E009" in proc.stderr.decode()
    doc = json.loads(proc.stdout)
    assert doc["effects"] == [] and doc["decision"] == "abort"
    [refusal] = doc["refused"]
    assert refusal["code"] == "E009" and refusal["what"] == f"POST {target.url}/keyed/pay"
    assert target.ledger() == []


def test_failing_command_never_commits(store, reel, target):
    fail = [sys.executable, "-c", f"import subprocess, sys; subprocess.run({client(store, target)!r}); sys.exit(3)"]
    proc = reel("run", *allow(target), "--commit", "--", *fail)
    assert proc.returncode == 3
    assert "a failing command is never committed" in proc.stdout.decode()
    assert target.ledger() == []


def test_terminal_prompt_commits_on_yes(store, target):
    """On a terminal with neither flag, the summary is shown and the answer decides."""
    master, slave = os.openpty()
    try:
        os.write(master, b"y\n")
        env = {k: v for k, v in os.environ.items() if k != "REEL_DIR"}
        proc = subprocess.run(
            [REEL, "run", *allow(target), "--", *client(store, target)],
            stdin=slave,
            capture_output=True,
            cwd=store,
            env=env,
            timeout=120,
        )
    finally:
        os.close(master)
        os.close(slave)
    assert proc.returncode == 0, proc.stderr
    assert "commit view run-" in proc.stderr.decode()
    out = proc.stdout.decode()
    assert out.index("pending effects:") < out.index("decision: commit (confirmed)")
    assert target.count("/keyed/pay") == 1


def test_terminal_prompt_declined_aborts_with_the_no_terminal_status(store, target):
    """ "n" at the prompt and no terminal to ask are both aborts for want of a yes: one exit status."""
    master, slave = os.openpty()
    try:
        os.write(master, b"n\n")
        env = {k: v for k, v in os.environ.items() if k != "REEL_DIR"}
        proc = subprocess.run(
            [REEL, "run", *allow(target), "--", *client(store, target)],
            stdin=slave,
            capture_output=True,
            cwd=store,
            env=env,
            timeout=120,
        )
    finally:
        os.close(master)
        os.close(slave)
    assert proc.returncode == DECLINED_EXIT, proc.stderr
    assert "decision: abort (not confirmed)" in proc.stdout.decode()
    assert target.ledger() == [] and Store.open(store).views() == []


def test_missing_command_exits_127_and_aborts(store, reel):
    proc = reel("run", "--view", "nothing", "--commit", "--", str(store / "no-such-command"))
    assert proc.returncode == 127
    assert "cannot run" in proc.stdout.decode()
    assert Store.open(store).views() == []


def test_options_after_the_command_belong_to_it(store, reel):
    proc = reel("run", "--abort", sys.executable, "-m", "json.tool", "--help", check=True)
    assert "json.tool" in proc.stdout.decode() and "decision: abort (--abort)" in proc.stdout.decode()


def test_scratch_write_the_view_may_not_make_is_refused(tmp_path):
    store = Store.init(tmp_path)
    loop = DryRun(
        store,
        [
            sys.executable,
            "-c",
            "import os; os.mkdir('docs'); open('docs/x', 'w').write('x'); open('y', 'w').write('y')",
        ],
        caps=["read,write=docs/"],
    )
    assert loop.execute() == 0
    assert [r.what for r in loop.refused] == ["write y"] and loop.refused[0].code == "E009"
    assert not loop.clean
    assert loop.changes == [{"status": "added", "name": "docs/x"}]
    loop.abort()


def test_commit_refuses_a_view_written_after_its_summary(tmp_path):
    store = Store.init(tmp_path)
    loop = DryRun(store, [sys.executable, "-c", "pass"], view="late")
    assert loop.execute() == 0 and loop.clean
    store.handle("late").put("sneaked", b"in")
    with pytest.raises(Conflict):
        loop.commit()
    assert store.handle("late").live and store.log()[0].view is None


def test_a_stopped_proxy_leaves_no_thread_that_takes_a_later_servers_connections(tmp_path):
    """Closing a listening socket does not wake a thread blocked in accept() on it; a signal (a child's
    exit is enough) makes the kernel restart that accept on the same descriptor number, by then a later
    server's listening socket, and the stopped proxy answered that server's next request itself (400:
    "needs an absolute http:// URL"). Stopping the proxy and the sandbox's bridge must end their
    accept threads; then every request to a server opened afterwards reaches it."""
    import http.client
    import threading

    from reelstore.intercept.sandbox import Sandbox

    store = Store.init(tmp_path / "s")
    store.fork("v")
    before = set(threading.enumerate())
    proxy = HttpProxy(store.repo, "v")
    bridge = Sandbox(store.repo, "v", ["unshare", "-n"])  # start() only listens; nothing runs unshare
    launch = Launch()
    proxy.start(launch)
    bridge.start(launch)
    bridge.finish()
    proxy.finish()
    left = [t.name for t in set(threading.enumerate()) - before if t.name.startswith("reel-run")]
    assert left == [], f"accept threads still running after stop: {left}"
    with Target(tmp_path / "ledger.jsonl") as target:
        for _ in range(20):
            subprocess.run(["true"], check=True)  # a SIGCHLD, as the suite's subprocesses send
            conn = http.client.HTTPConnection("127.0.0.1", target.server.server_address[1], timeout=20)
            try:
                conn.request("POST", "/blind/x", body=b"{}")
                answer = conn.getresponse()
                assert answer.status == 201, answer.read()
            finally:
                conn.close()
        assert target.count("/blind/x") == 20


def test_proxy_admits_nothing_once_the_command_exited(tmp_path):
    store = Store.init(tmp_path)
    store.fork("v")
    proxy = HttpProxy(store.repo, "v")
    launch = Launch()
    proxy.start(launch)
    assert launch.env["HTTP_PROXY"] == proxy.url and launch.env["NO_PROXY"] is None
    assert proxy.capture("POST", "http://127.0.0.1:9/x", {}, b"a").status == 202
    proxy.finish()
    assert proxy.capture("POST", "http://127.0.0.1:9/y", {}, b"b").status == 503
    assert len(store.status("v").effects) == 1
