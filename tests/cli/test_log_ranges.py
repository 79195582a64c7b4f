"""`reel log A..B`, `^A B`, `A...B` select the records git's `log` selects on the same history (a real
git repository built with the same messages), through the one revision resolver."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from gitserver import GIT_ENV

CAP = "read,write,delete,fire_b,fire_c="


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, timeout=60, env=GIT_ENV, check=True)
    return done.stdout.decode()


def _commit(run, trunk: str, message: str, effect: str | None = None) -> None:
    view = f"w-{message}"
    run("fork", view, "--from", f"refs/heads/{trunk}")
    run("put", view, f"{message}.txt", "-", input=message.encode())
    if effect:
        op = json.dumps({"action": "write", "path": f"out/{effect}", "content": "x"})
        assert run("effect", view, "--adapter", "fs", "--op", op).exit_code == 0
    assert run("commit", view, "-m", message).exit_code == 0


def _history(run, tmp_path: Path) -> Path:
    """main: c1 c2 c3; dev from main~1: d1 d2 (d2 with an effect, drained from dev's journal). The
    same in git, with a root commit for reel's `start trunk main` record."""
    run("init")
    run("config", "trunk.dev.cap", CAP)
    for m in ("c1", "c2", "c3"):
        _commit(run, "main", m)
    assert run("update-ref", "refs/heads/dev", "main~1").exit_code == 0
    _commit(run, "dev", "d1")
    _commit(run, "dev", "d2", effect="d2.txt")
    g = tmp_path / "git"
    subprocess.run(["git", "init", "-q", "-b", "main", str(g)], check=True, env=GIT_ENV, timeout=60)
    for m in ("start trunk main", "c1", "c2", "c3"):
        _git(g, "commit", "-q", "--allow-empty", "-m", m)
    _git(g, "checkout", "-q", "-b", "dev", "main~1")
    for m in ("d1", "d2"):
        _git(g, "commit", "-q", "--allow-empty", "-m", m)
    _git(g, "checkout", "-q", "main")
    return g


def test_log_ranges_select_what_git_log_selects(run, tmp_path: Path) -> None:
    g = _history(run, tmp_path)
    cases = [
        ["main"],
        ["dev"],
        ["main~2..main"],
        ["main..dev"],
        ["dev..main"],
        ["^main~1", "main"],
        ["^main", "dev"],
        ["main~1.."],
        ["..dev"],
        ["main..main"],
        ["dev~1..dev", "main~1..main"],
        ["main...dev"],
        ["dev...main~1"],
        ["main~1...main"],
        ["-n", "2", "main..dev"],
        ["-n", "0", "dev"],
    ]
    for args in cases:
        want = _git(g, "log", "--format=%s", *args).splitlines()
        got = run("log", "--oneline", *args)
        assert got.exit_code == 0, (args, got.output)
        messages = [line.split(" ", 1)[1] for line in got.stdout.splitlines()]
        if any("..." in a for a in args):  # git orders the two sides by date, reel tip by tip
            assert sorted(messages) == sorted(want), args
        else:
            assert messages == want, args


def test_a_range_reads_each_tip_trunk_journal_and_refuses_non_records(run, tmp_path: Path) -> None:
    _history(run, tmp_path)
    doc = json.loads(run("--json", "log", "main...dev").stdout)
    assert doc["trunk"] == "main"
    by_message = {r["message"]: r for r in doc["records"]}
    assert sorted(by_message) == ["c3", "d1", "d2"]
    assert [e["state"] for e in by_message["d2"]["effects"]] == ["succeeded"], "d2 was drained on dev"
    assert json.loads(run("--json", "log", "dev~1..dev").stdout)["trunk"] == "dev"
    run("fork", "agent")
    refused = run("log", "main..agent")
    assert refused.exit_code == 6 and "names a view, not a record" in refused.stderr
    assert run("log", "nope..main").exit_code == 4
    assert run("log", "main^2").exit_code == 6
