"""Who acts: every verb names the same principal (REEL_PRINCIPAL, else config user.name, else the login
name) in reflogs, records, views, effects and operator actions, as git names user.name everywhere."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from conftest import REEL

from reelstore.attribution import principal


def _reel(cwd: Path, *args: str, input: bytes = b"", **env: str) -> str:
    full = {k: v for k, v in os.environ.items() if k not in ("REEL_DIR", "REEL_PRINCIPAL")}
    full.update(env)
    done = subprocess.run([REEL, *args], cwd=cwd, env=full, input=input, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode()


def _reflog(cwd: Path, ref: str) -> list[str]:
    return [e["principal"] for e in json.loads(_reel(cwd, "--json", "reflog", ref))["entries"]]


def test_user_name_names_every_verbs_writes_and_the_environment_overrides_it(tmp_path: Path) -> None:
    _reel(tmp_path, "init", ".")
    _reel(tmp_path, "config", "user.name", "Ada  Lovelace")  # a run of spaces becomes one
    _reel(tmp_path, "fork", "w")
    assert json.loads(_reel(tmp_path, "cat-file", "-p", "refs/views/w"))["meta"]["principal"] == "Ada Lovelace"
    _reel(tmp_path, "put", "w", "a.txt", "-", input=b"a")
    _reel(tmp_path, "put", "w", "b.txt", "-", input=b"b", REEL_PRINCIPAL="bob")
    assert _reflog(tmp_path, "refs/views/w") == ["bob", "Ada Lovelace", "Ada Lovelace"]  # newest first
    _reel(tmp_path, "commit", "w", "-m", "one")
    assert json.loads(_reel(tmp_path, "cat-file", "-p", "main"))["author"] == "Ada Lovelace"
    assert _reflog(tmp_path, "main")[0] == "Ada Lovelace"
    _reel(tmp_path, "fork", "x", REEL_PRINCIPAL="carol")
    assert json.loads(_reel(tmp_path, "cat-file", "-p", "refs/views/x"))["meta"]["principal"] == "carol"
    _reel(tmp_path, "update-ref", "refs/heads/b", "main")
    assert _reflog(tmp_path, "refs/heads/b") == ["Ada Lovelace"]  # the plumbing names the same principal


def test_without_a_configured_name_the_login_name_is_used(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("REEL_PRINCIPAL", raising=False)
    for name in ("LOGNAME", "USER", "LNAME", "USERNAME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("USER", "dora")
    assert principal() == "dora" and principal("Ada L") == "Ada L"
    monkeypatch.setenv("REEL_PRINCIPAL", " eve\tx ")
    assert principal("Ada L") == "eve x"
    monkeypatch.setenv("REEL_PRINCIPAL", "")
    monkeypatch.delenv("USER")
    import pwd

    assert principal() == pwd.getpwuid(os.getuid()).pw_name
