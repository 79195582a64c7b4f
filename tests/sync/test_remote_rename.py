"""`reel remote rename` and `reel remote get-url` as real subprocesses against a real bare git remote:
everything keyed by the remote's name moves, a crash mid-rename is finished by running it again."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

from conftest import REEL
from gitserver import bare
from test_sync import grow

from reelstore.backend.repo import Repo
from reelstore.crashpoints import ENV
from reelstore.kernel.binding import bound_remote
from reelstore.kernel.views import load_live
from reelstore.sync.state import SyncState


def _setup(tmp_path: Path, reel) -> tuple[Path, Path]:
    """Store `a` with remote `origin` (tracked by main), a pushed trunk and a pushed (so bound) view."""
    remote = bare(tmp_path / "r.git")
    reel("init", "a", check=True)
    a = tmp_path / "a"
    reel("-C", str(a), "remote", "add", "--track", "origin", str(remote), check=True)
    grow(Repo.open(a), 2, "x")
    reel("-C", str(a), "fork", "agent", check=True)
    reel("-C", str(a), "put", "agent", "notes.txt", "-", input=b"hello\n", check=True)
    reel("-C", str(a), "push", "origin", check=True)
    return a, remote


def _facts(repo: Repo, remote: str) -> tuple[int, int]:
    state = SyncState(repo)
    try:
        return len(state.seen(remote)), len(state.tips(remote))
    finally:
        state.close()


def _assert_renamed(a: Path, before: list[str], facts: tuple[int, int]) -> None:
    repo = Repo.open(a)
    assert repo.refs.list("refs/remotes/origin/") == []
    after = [
        name.replace("refs/remotes/upstream/", "refs/remotes/origin/")
        for name, _ in repo.refs.list("refs/remotes/upstream/")
    ]
    assert after == before
    assert repo.config.get("remote.origin.url") is None
    assert repo.config.get("trunk.main.remote") == "upstream"
    assert _facts(repo, "origin") == (0, 0) and _facts(repo, "upstream") == facts
    assert bound_remote(repo, load_live(repo, "agent").view) == "upstream"


def test_rename_moves_config_refs_state_and_bindings(tmp_path: Path, reel) -> None:
    a, remote = _setup(tmp_path, reel)
    repo = Repo.open(a)
    before = [name for name, _ in repo.refs.list("refs/remotes/origin/")]
    facts = _facts(repo, "origin")
    assert len(before) == 2 and facts[0] == 2 and facts[1] >= 1

    out = reel("-C", str(a), "--json", "remote", "rename", "origin", "upstream", check=True)
    assert json.loads(out.stdout) == {"old": "origin", "new": "upstream", "moved_refs": 2}
    _assert_renamed(a, before, facts)
    assert reel("-C", str(a), "remote", "-v", check=True).stdout.decode() == f"upstream\t{remote}\n"
    assert reel("-C", str(a), "remote", "get-url", "upstream", check=True).stdout.decode() == f"{remote}\n"
    assert reel("-C", str(a), "remote", "get-url", "--push", "upstream", check=True).stdout.decode() == f"{remote}\n"

    # The moved facts are the remote's: the next push is a fast-forward by compare-and-swap. The bound
    # view commits with no --remote: main tracks upstream, and the view is bound to upstream (were it
    # still bound to origin, this would be E015).
    grow(Repo.open(a), 1, "y")
    pushed = json.loads(reel("-C", str(a), "--json", "push", "upstream", "main", check=True).stdout)
    assert [r["status"] for r in pushed["refs"]] == ["fast-forward"]
    reel("-C", str(a), "commit", "agent", check=True)
    repo = Repo.open(a)
    assert repo.refs["refs/remotes/upstream/heads/main"] == repo.refs["refs/heads/main"]


def test_rename_errors(tmp_path: Path, reel) -> None:
    a, remote = _setup(tmp_path, reel)
    reel("-C", str(a), "remote", "add", "other", str(remote), check=True)
    cases = [
        (("rename", "nowhere", "x"), 4, b"error: E001: no remote named 'nowhere'"),
        (("rename", "origin", "other"), 6, b"error: E014: remote 'other' already exists"),
        (("rename", "origin", "origin"), 6, b"error: E014: remote 'origin' already exists"),
        (("rename", "origin", "bad/name"), 6, b"error: E014: invalid remote name 'bad/name'"),
        (("get-url", "nowhere"), 4, b"error: E001: no remote named 'nowhere'"),
    ]
    for args, status, message in cases:
        done = reel("-C", str(a), "remote", *args)
        assert (done.returncode, done.stderr.splitlines()[0][: len(message)]) == (status, message), args
    assert reel("-C", str(a), "remote", "rename", "origin").returncode == 2
    # nothing moved by a refused rename
    repo = Repo.open(a)
    assert len(repo.refs.list("refs/remotes/origin/")) == 2 and repo.config.get("trunk.main.remote") == "origin"

    reel("-C", str(a), "update-ref", "refs/remotes/stray/heads/main", "main", check=True)
    stray = reel("-C", str(a), "remote", "rename", "origin", "stray")
    assert stray.returncode == 6 and b"refs/remotes/stray/ already holds refs" in stray.stderr
    assert len(Repo.open(a).refs.list("refs/remotes/origin/")) == 2


def test_rename_killed_before_its_config_is_finished_by_running_it_again(tmp_path: Path, reel) -> None:
    a, _ = _setup(tmp_path, reel)
    repo = Repo.open(a)
    before = [name for name, _ in repo.refs.list("refs/remotes/origin/")]
    facts = _facts(repo, "origin")
    env = {**os.environ, ENV: "remote-rename:config"}
    env.pop("REEL_DIR", None)
    killed = subprocess.run(
        [REEL, "-C", str(a), "remote", "rename", "origin", "upstream"], env=env, capture_output=True, timeout=120
    )
    assert killed.returncode == -signal.SIGKILL
    half = Repo.open(a)
    assert half.config.get("remote.origin.url") and half.refs.list("refs/remotes/origin/") == []

    again = reel("-C", str(a), "--json", "remote", "rename", "origin", "upstream", check=True)
    assert json.loads(again.stdout)["moved_refs"] == 0
    _assert_renamed(a, before, facts)
