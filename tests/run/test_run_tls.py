"""`reel run` sealed: HTTPS captured, nothing escapes, secrets never stored. Real clients (curl, wget,
Python urllib/requests/httpx, node) in real processes, inside the run's network namespace, against a
real HTTPS target on 127.0.0.1 with its own CA (made by the test; the store trusts it via `http.trust`).
A facility this needs and the machine lacks makes the test fail, never skip."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import HELPERS
from tls_target import TlsTarget

from reelstore import Store
from reelstore.backend.repo import Repo

CLIENTS = HELPERS / "clients"
TOOLS = ("curl", "wget", "node", "unshare", "git")


@pytest.fixture(autouse=True)
def tools() -> None:
    missing = [t for t in TOOLS if shutil.which(t) is None]
    assert not missing, f"this machine lacks {missing}: install them (see .ci/run)"


@pytest.fixture
def target(tmp_path: Path):
    with TlsTarget(tmp_path / "target") as t:
        yield t


@pytest.fixture
def store(tmp_path: Path, target: TlsTarget) -> Path:
    s = Store.init(tmp_path)
    s.repo.config.set("http.trust", str(target.ca))
    s.repo.config.save()
    return tmp_path


def posts(target: TlsTarget) -> list[dict]:
    return [e for e in target.ledger() if e["method"] != "GET"]


def run_json(reel, target: TlsTarget, *args: str, script: str):
    proc = reel("--json", "run", "--allow", f"127.0.0.1:{target.port}", *args, "--", "sh", "-c", script)
    assert proc.stdout, proc.stderr.decode()
    return proc, json.loads(proc.stdout)


def agent(url: str) -> str:
    """Every client, through the proxy: a GET and a POST each (requests also a chunked POST)."""
    py = shlex.quote(sys.executable)
    return " && ".join(
        [
            f"curl -sS --fail {url}/curl-get",
            f"curl -sS --fail -H 'Authorization: Bearer TOKEN-curl-s3cr3t' -H 'X-Test: curl' "
            f"-H 'Content-Type: application/json' -d '{{\"client\": \"curl\"}}' {url}/curl",
            f"printf 'streamed body' | curl -sS --fail -H 'Transfer-Encoding: chunked' -H 'X-Test: curl-chunked' "
            f"--data-binary @- {url}/curl-chunked",
            f"wget -q -O- {url}/wget-get",
            f"wget -q -O- --header='Authorization: Bearer TOKEN-wget-s3cr3t' --header='X-Test: wget' "
            f"--header='Content-Type: text/plain' --post-data='wget body' {url}/wget",
            *(f"{py} {CLIENTS / 'pyclient.py'} {lib} {url}" for lib in ("urllib", "requests", "httpx")),
            f"node {CLIENTS / 'nodeclient.js'} {url}",
        ]
    )


EXPECTED = {
    "/curl": ('{"client": "curl"}', "curl", "application/json"),
    "/curl-chunked": ("streamed body", "curl-chunked", None),
    "/wget": ("wget body", "wget", "text/plain"),
    "/urllib": ('{"client": "urllib", "n": 1}', "urllib", "application/json"),
    "/requests": ('{"client": "requests", "n": 1}', "requests", "application/json"),
    "/requests-chunked": ("part one, part two", "chunked", None),
    "/httpx": ('{"client": "httpx", "n": 1}', "httpx", "application/json"),
    "/node": ('{"client":"node","n":1}', "node", "application/json"),
}
GETS = {"/curl-get", "/wget-get", "/urllib-get", "/requests-get", "/httpx-get", "/node-get"}


def test_abort_every_client_passes_gets_and_sends_nothing_else(store, reel, target):
    proc, doc = run_json(reel, target, "--abort", script=agent(target.url))
    assert proc.returncode == 0, proc.stderr.decode()
    assert doc["status"] == 0 and doc["clean"], doc
    assert posts(target) == []
    assert {e["path"] for e in target.ledger()} == GETS
    assert {p["url"].removeprefix(target.url) for p in doc["passed"]} == GETS
    assert all(p["status"] == 200 for p in doc["passed"])
    assert sorted(e["url"].removeprefix(target.url) for e in doc["effects"]) == sorted(EXPECTED)
    assert all(e["url"].startswith("https://") for e in doc["effects"])
    assert doc["decision"] == "abort" and doc["blocked"] == [] and doc["refused"] == []


def test_commit_delivers_each_request_once_identical_with_its_secret(store, reel, target):
    proc, doc = run_json(reel, target, "--commit", script=agent(target.url))
    assert proc.returncode == 0, proc.stderr.decode()
    assert doc["decision"] == "commit", doc
    sent = posts(target)
    assert sorted(e["path"] for e in sent) == sorted(EXPECTED)
    for e in sent:
        body, tag, ctype = EXPECTED[e["path"]]
        assert e["body"] == body, e
        assert e["headers"]["x-test"] == tag
        if ctype:
            assert e["headers"]["content-type"] == ctype
        if tag in ("curl", "wget", "urllib", "requests", "httpx", "node"):
            assert e["headers"]["authorization"] == f"Bearer TOKEN-{tag}-s3cr3t"
    assert all(o["state"] == "succeeded" for o in doc["commit"]["drain"]["outcomes"])


def test_clients_that_ignore_the_proxy_are_captured_all_the_same(store, reel, target):
    """curl --noproxy, Node's fetch, urllib without a proxy handler: their direct connections are
    tunnelled to the proxy inside the sandbox, so their POSTs are pending effects like curl's."""
    py = shlex.quote(sys.executable)
    script = "; ".join(
        [
            f"curl -sS --noproxy '*' -d escape {target.url}/curl-direct; echo curl=$?",
            f"node {CLIENTS / 'nodeclient.js'} {target.url} bypass",
            f"{py} {CLIENTS / 'pyclient.py'} urllib {target.url} bypass",
            "curl -s --noproxy '*' https://localhost/default-port",
            "true",
        ]
    )
    proc, doc = run_json(reel, target, "--abort", script=script)
    assert posts(target) == [], "a client's POST reached the target"
    assert {e["url"] for e in doc["effects"]} == {f"{target.url}/{p}" for p in ("curl-direct", "node-fetch", "urllib")}
    assert any(
        "captured through the proxy all the same" in n and f"127.0.0.1:{target.port}" in n for n in doc["notes"]
    ), doc["notes"]
    assert any("127.0.0.1:443 is on this machine" in r["message"] for r in doc["refused"]) and not doc["clean"]
    assert doc["decision"] == "abort"


def test_remote_host_is_unreachable_in_the_sandbox(store, reel):
    probe = (
        "import errno, socket\ntry:\n socket.create_connection(('192.0.2.1', 443), 5)\n"
        "except OSError as e:\n print(errno.errorcode[e.errno], e.strerror)"
    )
    out = reel("run", "--abort", "--", sys.executable, "-c", probe)
    assert "ENETUNREACH Network is unreachable" in out.stdout.decode(), out.stdout.decode()


def test_force_commits_a_run_with_refused_attempts(store, reel, target):
    script = f"curl -s --noproxy '*' https://localhost/x; curl -sS --fail -d ok {target.url}/forced"
    proc, doc = run_json(reel, target, "--commit", "--force", script=script)
    assert proc.returncode == 0, proc.stderr.decode()
    assert doc["decision"] == "commit" and not doc["clean"] and doc["refused"]
    assert [e["path"] for e in posts(target)] == ["/forced"]


def test_secrets_are_never_stored_nor_pushed(store, reel, target, tmp_path):
    token = "Bearer TOKEN-curl-s3cr3t"
    cfg = Repo.open(store).config
    cfg.set("secrets.header", "X-Custom-Token")
    cfg.set("secrets.param", "api_key")
    cfg.save()
    script = (
        f"curl -sS --fail -H 'Authorization: {token}' -H 'X-Custom-Token: custom-s3cr3t' "
        f"-H 'Cookie: sid=cookie-s3cr3t' -d 'body' '{target.url}/pay?api_key=param-s3cr3t&x=1'"
    )
    proc, doc = run_json(reel, target, "--commit", "-m", "", script=script)
    assert proc.returncode == 0, proc.stderr.decode()
    secrets = [b"TOKEN-curl-s3cr3t", b"custom-s3cr3t", b"cookie-s3cr3t", b"param-s3cr3t"]
    assert not any(s.decode() in proc.stdout.decode() for s in secrets)
    [sent] = posts(target)
    assert sent["headers"]["authorization"] == token and sent["headers"]["x-custom-token"] == "custom-s3cr3t"
    assert sent["headers"]["cookie"] == "sid=cookie-s3cr3t" and sent["path"] == "/pay?api_key=param-s3cr3t&x=1"
    bare = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)
    reel("remote", "add", "origin", str(bare), check=True)
    reel("push", "origin", "main", check=True)
    ours = reel("cat-file", "--batch", "--batch-all-objects", check=True).stdout
    theirs = subprocess.run(
        ["git", "-C", str(bare), "cat-file", "--batch", "--batch-all-objects"], capture_output=True, check=True
    ).stdout
    assert b"<secret>" in ours and len(theirs) > 1000, "the scans must see the effect's content"
    for s in secrets:
        assert s not in ours and s not in theirs
        for cmd in (["log"], ["show", "main"], ["--json", "show", "main"], ["--json", "log"]):
            assert s not in reel(*cmd, check=True).stdout
    for f in (store / ".reel").rglob("*"):
        if f.is_file() and "secrets" not in f.parts:
            assert not any(s in f.read_bytes() for s in secrets), f
    kept = store / ".reel" / "secrets"
    assert stat.S_IMODE(kept.stat().st_mode) == 0o700
    assert all(stat.S_IMODE(f.stat().st_mode) == 0o600 for f in kept.iterdir())


def test_reel_effect_takes_secret_references_resolved_only_at_send(store, reel, target, monkeypatch):
    Store(Repo.open(store)).secrets.put("stripe", "sk_live_stored")
    reel("fork", "pay", check=True)
    op = {
        "method": "POST",
        "url": f"{target.url}/eff",
        "body": "x",
        "headers": {"Authorization": {"$secret": "stripe"}, "X-Api-Key": {"$env": "PAY_KEY"}},
    }
    made = reel("effect", "pay", "--adapter", "http", "--op", json.dumps(op), check=True).stdout.decode().strip()
    shown = reel("cat-file", "-p", made, check=True).stdout.decode()
    assert "<secret>" in shown and "sk_live_stored" not in shown
    env = dict(os.environ, PAY_KEY="env-key-value")
    env.pop("REEL_DIR", None)
    done = subprocess.run([_reel(), "commit", "pay"], cwd=store, env=env, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr.decode()
    [sent] = posts(target)
    assert sent["headers"]["authorization"] == "sk_live_stored" and sent["headers"]["x-api-key"] == "env-key-value"


def test_a_missing_secret_fails_the_effect_before_anything_is_sent(store, reel, target):
    reel("fork", "pay", check=True)
    op = {"method": "POST", "url": f"{target.url}/eff", "headers": {"Authorization": {"$secret": "absent"}}}
    reel("effect", "pay", "--adapter", "http", "--op", json.dumps(op), check=True)
    done = reel("--json", "commit", "pay")
    [outcome] = json.loads(done.stdout)["drain"]["outcomes"]
    assert outcome["state"] in ("failed", "not_sent") and "missing" in outcome["note"], outcome
    assert target.ledger() == []


def test_ca_is_made_once_private_and_outside_the_objects(store, reel):
    first = reel("run", "--ca-path", check=True).stdout.decode().strip()
    again = reel("run", "--ca-path", check=True).stdout.decode().strip()
    assert first == again and Path(first).is_file() and "BEGIN CERTIFICATE" in Path(first).read_text()
    ca_dir = Path(first).parent
    assert ca_dir == store / ".reel" / "ca"
    assert stat.S_IMODE(ca_dir.stat().st_mode) == 0o700
    assert stat.S_IMODE((ca_dir / "ca-key.pem").stat().st_mode) == 0o600


def test_loopback_not_allowed_and_websocket_are_refused_and_not_clean(store, reel, target):
    proc = reel(
        "--json", "run", "--commit", "--", "sh", "-c", f"curl -s -o /dev/null -w '%{{http_code}}\\n' {target.url}/get"
    )
    doc = json.loads(proc.stdout)
    assert proc.returncode == 6 and not doc["clean"] and doc["refused"][0]["what"].startswith("GET https://")
    assert "--allow" in doc["refused"][0]["message"]
    ws = reel(
        "--json",
        "run",
        "--commit",
        "--allow",
        f"127.0.0.1:{target.port}",
        "--",
        "sh",
        "-c",
        f"curl -s --http1.1 -o /dev/null -w '%{{http_code}}' -H 'Connection: Upgrade' -H 'Upgrade: websocket' "
        f"-H 'Sec-WebSocket-Version: 13' -H 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==' {target.url}/ws",
    )
    doc = json.loads(ws.stdout)
    assert ws.returncode == 6 and "WebSocket" in doc["refused"][0]["message"]
    assert target.ledger() == []


def test_without_namespaces_run_refuses_unless_no_sandbox(store, reel, target, tmp_path):
    env = {"PATH": str(tmp_path / "empty-bin"), "HOME": os.environ.get("HOME", "/")}
    (tmp_path / "empty-bin").mkdir()
    refused = subprocess.run(
        [_reel(), "run", "--abort", "--", "/bin/true"], cwd=store, env=env, capture_output=True, timeout=60
    )
    assert refused.returncode == 6 and b"error: E014" in refused.stderr, refused.stderr
    assert subprocess.run([_reel(), "views"], cwd=store, env=env, capture_output=True).stdout.strip() in (b"", b"none")
    loose = subprocess.run(
        [_reel(), "run", "--abort", "--no-sandbox", "--", "/bin/true"],
        cwd=store,
        env=env,
        capture_output=True,
        timeout=60,
    )
    assert loose.returncode == 0 and b"--no-sandbox" in loose.stderr and b"sends its requests for real" in loose.stderr


def _reel() -> str:
    from conftest import REEL

    return REEL


def test_a_raw_tunnel_is_refused_and_keep_alive_serves_many_requests(store, reel, target):
    code = textwrap.dedent(f"""
        import os, socket, ssl, urllib.parse
        proxy = urllib.parse.urlsplit(os.environ["HTTPS_PROXY"])
        raw = socket.create_connection((proxy.hostname, proxy.port))
        raw.sendall(b"CONNECT 127.0.0.1:{target.port} HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n")
        print("CONNECT", raw.recv(100).split(b"\\r\\n")[0].decode())
        raw.sendall(b"\\x00\\x01binary protocol")
        print("RAW", raw.recv(100))
        tun = socket.create_connection((proxy.hostname, proxy.port))
        tun.sendall(b"CONNECT 127.0.0.1:{target.port} HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n")
        tun.recv(100)
        tls = ssl.create_default_context().wrap_socket(tun, server_hostname="127.0.0.1")
        f = tls.makefile("rb")
        for i in range(3):
            head = f"POST /keep/{{i}} HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\nContent-Length: 1\\r\\n\\r\\n"
            tls.sendall((head + str(i)).encode())
            status = f.readline()
            length = 0
            while (line := f.readline()) not in (b"\\r\\n", b""):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            f.read(length)
            print("KEEP", i, status.split()[1].decode())
    """)
    proc, doc = run_json(reel, target, "--abort", script=f"{shlex.quote(sys.executable)} -c {shlex.quote(code)}")
    out = proc.stderr.decode()
    assert "CONNECT HTTP/1.1 200 Connection established" in out and "RAW b''" in out, out
    assert [line for line in out.splitlines() if line.startswith("KEEP")] == ["KEEP 0 202", "KEEP 1 202", "KEEP 2 202"]
    assert [e["url"] for e in doc["effects"]] == [f"{target.url}/keep/{i}" for i in range(3)]
    assert [r["what"] for r in doc["refused"]] == [f"TCP 127.0.0.1:{target.port}"] and not doc["clean"]
    assert target.ledger() == []


def test_python_api_takes_secret_references_and_scrubs_raw_credentials(tmp_path):
    s = Store.init(tmp_path / "api")
    s.secrets.put("stripe", "sk_api_value")
    v = s.fork("v")
    v.effect(
        "http",
        {
            "method": "POST",
            "url": "https://pay.example/charge",
            "headers": {"Authorization": {"$secret": "stripe"}, "X-Api-Key": "raw-key-value", "X-Plain": "visible"},
        },
    )
    [e] = v.status().effects
    op = e.op
    assert op["headers"] == {"Authorization": "<secret>", "X-Api-Key": "<secret>", "X-Plain": "visible"}
    assert op["secrets"]["headers"]["Authorization"] == "store:stripe"
    kept = op["secrets"]["headers"]["X-Api-Key"].removeprefix("store:")
    assert s.secrets.get(kept) == "raw-key-value"
    dump = subprocess.run(
        [_reel(), "-C", str(tmp_path / "api"), "cat-file", "--batch", "--batch-all-objects"],
        capture_output=True,
        check=True,
    ).stdout
    assert b"<secret>" in dump and b"raw-key-value" not in dump and b"sk_api_value" not in dump
    v.abort()


DEFAULT_SECRETS = {  # what the command sends -> the value that must never be stored
    "-H 'X-Auth-Token: xauth-s3cr3t'": b"xauth-s3cr3t",
    "-H 'Private-Token: private-s3cr3t'": b"private-s3cr3t",
    "-H 'X-Goog-Api-Key: goog-s3cr3t'": b"goog-s3cr3t",
    "-H 'X-Amz-Security-Token: amz-s3cr3t'": b"amz-s3cr3t",
    "-H 'Api-Key: apikey-s3cr3t'": b"apikey-s3cr3t",
    "-H 'X-Session-Id: session-s3cr3t'": b"session-s3cr3t",
}


def test_credentials_are_scrubbed_by_name_without_configuration(store, reel, target, tmp_path):
    """Headers, query parameters and form fields whose names say credential, with no `[secrets]`
    config; the summary names what was kept out; the request is delivered whole on commit."""
    headers = " ".join(DEFAULT_SECRETS)
    url = f"{target.url}/pay?access_token=qtoken-s3cr3t&api_key=qkey-s3cr3t&sig=qsig-s3cr3t&page=2"
    script = (
        f"curl -sS --fail {headers} -H 'Idempotency-Key: idem-1' "
        f"--data-urlencode 'password=form-s3cr3t' --data-urlencode 'user=bob' '{url}'"
    )
    proc, doc = run_json(reel, target, "--commit", "-m", "", script=script)
    assert proc.returncode == 0, proc.stderr.decode()
    secrets = [*DEFAULT_SECRETS.values(), b"qtoken-s3cr3t", b"qkey-s3cr3t", b"qsig-s3cr3t", b"form-s3cr3t"]
    [effect] = doc["effects"]
    assert {
        "header X-Auth-Token",
        "header Private-Token",
        "header X-Goog-Api-Key",
        "header Api-Key",
        "param access_token",
        "param api_key",
        "param sig",
        "field password",
    } <= set(effect["scrubbed"])
    assert not any(n.endswith(("Idempotency-Key", " page", " user")) for n in effect["scrubbed"]), effect
    [sent] = posts(target)
    assert sent["path"] == "/pay?access_token=qtoken-s3cr3t&api_key=qkey-s3cr3t&sig=qsig-s3cr3t&page=2"
    assert sent["headers"]["x-goog-api-key"] == "goog-s3cr3t" and sent["body"] == "password=form-s3cr3t&user=bob"
    bare = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)
    reel("remote", "add", "origin", str(bare), check=True)
    reel("push", "origin", "main", check=True)
    ours = reel("cat-file", "--batch", "--batch-all-objects", check=True).stdout
    theirs = subprocess.run(
        ["git", "-C", str(bare), "cat-file", "--batch", "--batch-all-objects"], capture_output=True, check=True
    ).stdout
    assert b"<secret>" in ours and b"idem-1" in ours and b"user=bob" in ours, "the scans see the effect"
    for s in secrets:
        assert s not in ours and s not in theirs and s not in proc.stdout, s


def test_scrubbing_is_configurable_both_ways(store, reel, target):
    cfg = Repo.open(store).config
    cfg.set("secrets.plain", "X-Session-Id")
    cfg.set("secrets.header", "X-Tenant")
    cfg.save()
    script = f"curl -sS --fail -H 'X-Session-Id: visible-1' -H 'X-Tenant: hidden-1' -d x {target.url}/pay"
    proc, doc = run_json(reel, target, "--abort", script=script)
    [effect] = doc["effects"]
    assert effect["scrubbed"] == ["header X-Tenant"], effect
    ours = reel("cat-file", "--batch", "--batch-all-objects", check=True).stdout
    assert b"visible-1" in ours and b"hidden-1" not in ours
