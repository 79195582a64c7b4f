"""The kernel's commands end to end: exit statuses, --json documents, and a whole session from init to drain."""

from __future__ import annotations

import json
from pathlib import Path


def js(result) -> dict:
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_done_when_sequence_with_the_real_binary(tmp_path: Path, reel) -> None:
    reel("init", check=True)
    (tmp_path / "file").write_text("state\n")
    reel("fork", "a", check=True)
    reel("put", "a", "x.txt", "file", check=True)
    op = json.dumps({"action": "write", "path": "out/a.txt", "content": "fired once\n"})
    eid = reel("effect", "a", "--adapter", "fs", "--op", op, check=True).stdout.decode().strip()
    status = reel("status", "a", check=True).stdout.decode()
    assert "x.txt" in status and eid[:12] in status and "fs:out/a.txt" in status
    assert not (tmp_path / "out").exists()
    reel("commit", "a", check=True)
    assert (tmp_path / "out/a.txt").read_text() == "fired once\n"
    log = json.loads(reel("--json", "log", check=True).stdout)
    assert [e["state"] for e in log["records"][0]["effects"]] == ["succeeded"]

    reel("fork", "b", check=True)
    op_b = json.dumps({"action": "write", "path": "out/b.txt", "content": "never\n"})
    eid_b = reel("effect", "b", "--adapter", "fs", "--op", op_b, check=True).stdout.decode().strip()
    reel("abort", "b", check=True)
    assert reel("cat-file", "-e", eid_b).returncode == 0
    reel("gc", "--prune=now", check=True)
    assert reel("cat-file", "-e", eid_b).returncode == 4
    assert reel("cat-file", "-e", eid).returncode == 0
    assert not (tmp_path / "out/b.txt").exists()
    assert reel("put", "b", "y", "file").returncode == 8

    widened = reel("fork", "c", "--from", "main", "--cap", "read=docs/")
    assert widened.returncode == 0
    wider = reel("fork", "d", "--from", "c", "--cap", "read,write=docs/")
    assert wider.returncode == 6 and b"E009" in wider.stderr and b"ops" in wider.stderr


def test_exit_statuses(run) -> None:
    run("init")
    assert run("put", "nope", "x", "-", input=b"").exit_code == 4
    run("fork", "a")
    assert run("fork", "a").exit_code == 5
    assert run("fork", "--cap", "bogus", "z").exit_code == 6
    assert run("effect", "a", "--adapter", "fs", "--op", "not json").exit_code == 6
    assert run("effect", "a", "--adapter", "fs", "--op", '{"action":"write","path":"../x","content":""}').exit_code == 6
    assert run("get", "a", "missing").exit_code == 4
    assert run("commit", "a").exit_code == 0
    for args in (("commit", "a"), ("abort", "a"), ("status", "a"), ("get", "a", "x"), ("ls", "a")):
        assert run(*args).exit_code == 8, args


def test_json_documents(run, tmp_path: Path) -> None:
    run("init")
    js(run("--json", "fork", "a", "--cap", "read,write,delete=docs/", "--cap", "fire_c=fs:out/;budget=2"))
    put = js(run("--json", "put", "a", "docs/one", "-", input=b"1"))
    assert put["size"] == 1
    run("put", "a", "docs/two", "-", input=b"2")
    assert js(run("--json", "rm", "a", "docs/two"))["removed"] is True
    eff = js(run("--json", "effect", "a", "--adapter", "fs", "--op", '{"action":"write","path":"out/f","content":"c"}'))
    assert eff["resource"] == "fs:out/f" and eff["class"] == "C"
    status = js(run("--json", "status", "a"))
    assert [c["name"] for c in status["changes"]] == ["docs/one"]
    assert [e["id"] for e in status["effects"]] == [eff["id"]]
    assert status["caps"] == ["read,write,delete=docs/", "fire_c=fs:out/;budget=2"]
    assert js(run("--json", "views"))["views"][0]["name"] == "a"
    assert js(run("--json", "diff", "a"))["changes"][0]["status"] == "added"
    assert [e["name"] for e in js(run("--json", "ls", "a", "docs/"))["entries"]] == ["docs/one"]
    assert js(run("--json", "get", "a", "docs/one"))["data"] == "1"
    shown = js(run("--json", "show", eff["id"][:10]))
    assert shown["kind"] == "effect" and shown["object"]["resource"] == "fs:out/f"
    done = js(run("--json", "commit", "a", "-m", "msg"))
    assert done["drain"]["complete"] and done["record"]
    log = js(run("--json", "log"))
    assert log["records"][0]["message"] == "msg" and log["records"][0]["view"] == "a"
    assert js(run("--json", "show", "main"))["kind"] == "record"


def test_text_output(run) -> None:
    run("init")
    run("fork", "a")
    run("put", "a", "n", "-", input=b"x")
    assert run("get", "a", "n").output == "x"
    assert "A\t-" in run("diff", "a").output
    assert "pending effects (0)" in run("status").output
    out = run("commit", "a").output
    assert out.startswith("committed view a to refs/heads/main as record ")
    assert "commit view a" in run("log").output


def test_isolated_child_commit_prints_merge(run) -> None:
    run("init")
    run("fork", "p")
    run("fork", "--from", "p", "c")
    assert run("commit", "c").output.startswith("merged view c into refs/views/p")
    assert run("abort", "p").output == "aborted view p\n"


def test_demo_runs_and_shows_what_fired_and_what_vanished(reel, tmp_path: Path) -> None:
    done = reel("demo", "--dir", str(tmp_path / "d"), check=True)
    out = done.stdout.decode()
    assert "reports/wrong.txt was never written" in out and "(exit status 4)" in out
    assert (tmp_path / "d" / "outbox" / "reports" / "final.txt").read_text() == "the report, attempt 1\n"
    assert not (tmp_path / "d" / "outbox" / "reports" / "wrong.txt").exists()
