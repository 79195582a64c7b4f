"""`reel remote|push|fetch|clone` as real subprocesses: output, JSON and exit statuses."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from conftest import REEL
from gitserver import bare, fsck, git
from test_sync import _plant, grow

from reelstore import sync
from reelstore.backend.repo import Repo
from reelstore.objects import Blob


def test_remote_push_clone_fetch_round_trip(tmp_path: Path, reel) -> None:
    remote = bare(tmp_path / "r.git")
    reel("init", "a", check=True)
    a = tmp_path / "a"
    reel("-C", str(a), "remote", "add", "origin", str(remote), check=True)
    assert reel("-C", str(a), "remote", "-v").stdout.decode() == f"origin\t{remote}\n"
    bad = reel("-C", str(a), "remote", "add", "bad/name", str(remote))
    assert bad.returncode == 6 and b"E014" in bad.stderr
    grow(Repo.open(a), 5, "x")
    out = reel("-C", str(a), "--json", "push", check=True)
    doc = json.loads(out.stdout)
    assert doc["objects"] == 9 and [r["status"] for r in doc["refs"]] == ["new"]
    assert out.stderr == b""  # not a terminal: no progress
    fsck(remote)

    cloned = reel("clone", str(remote), check=True).stdout.decode()
    assert "Cloned" in cloned and "refs/heads/main" in cloned
    b = tmp_path / "r"
    assert Repo.open(b).refs["refs/heads/main"] == Repo.open(a).refs["refs/heads/main"]

    grow(Repo.open(a), 2, "y")
    reel("-C", str(a), "push", "origin", "main", check=True)
    fetched = json.loads(reel("-C", str(b), "--json", "fetch", check=True).stdout)
    assert fetched["objects"] == 4 and fetched["updated"] == ["refs/remotes/origin/heads/main"]
    shown = reel("-C", str(b), "cat-file", "-t", "origin/heads/main", check=True).stdout
    assert shown.strip() == b"record"
    for store in (a, b):
        assert reel("-C", str(store), "fsck", "--full").returncode == 0


def test_exit_statuses(tmp_path: Path, reel) -> None:
    remote = bare(tmp_path / "r.git")
    reel("init", "a", check=True)
    a = tmp_path / "a"
    reel("-C", str(a), "remote", "add", "origin", str(remote), check=True)
    grow(Repo.open(a), 1, "a")
    reel("-C", str(a), "push", check=True)
    reel("clone", str(remote), "b", check=True)
    grow(Repo.open(a), 1, "a2")
    reel("-C", str(a), "push", check=True)
    grow(Repo.open(tmp_path / "b"), 1, "b2")

    lost = reel("-C", str(tmp_path / "b"), "push")
    assert lost.returncode == 5 and lost.stderr.startswith(b"error: E015: ")
    missing = reel("-C", str(a), "push", "nowhere")
    assert missing.returncode == 4 and b"E001" in missing.stderr
    no_ref = reel("-C", str(a), "push", "origin", "no-such-ref")
    assert no_ref.returncode == 4

    forged = bare(tmp_path / "forged.git")
    good = Blob(b"honest")
    _plant(forged, good.id.hex(), Blob(b"evil").encode(), good.id.hex())
    refused = reel("clone", str(forged), "c")
    assert refused.returncode == 3 and b"E007" in refused.stderr
    assert not (tmp_path / "c").exists()
    gone = reel("clone", str(tmp_path / "nothing-here"), "d")
    assert gone.returncode == 4 and b"E010" in gone.stderr

    assert reel("-C", str(a), "remote", "remove", "origin").returncode == 0
    assert reel("-C", str(a), "remote", "list").stdout == b""
    assert git("--git-dir", str(remote), "for-each-ref").count("refs/reel/heads/main") == 1


def test_remote_remove_is_refused_while_a_view_is_bound_to_it(tmp_path: Path, reel) -> None:
    remote = bare(tmp_path / "r.git")
    a = str(tmp_path / "a")
    reel("init", a, check=True)
    reel("-C", a, "remote", "add", "origin", str(remote), check=True)
    for view in ("pushed", "kept", "local"):
        reel("-C", a, "fork", view, check=True)
    reel("-C", a, "push", "origin", "pushed", check=True)
    reel("-C", a, "push", "origin", "kept", check=True)

    refused = reel("-C", a, "--json", "remote", "remove", "origin")
    assert refused.returncode == 5, refused.stderr
    error = json.loads(refused.stderr)["error"]
    assert error["code"] == "E002" and error["details"]["views"] == ["kept", "pushed"]
    assert reel("-C", a, "remote", "get-url", "origin", check=True).stdout.strip() == str(remote).encode()

    reel("-C", a, "abort", "pushed", check=True)  # removes the remote copy first
    assert reel("-C", a, "remote", "remove", "origin").returncode == 5  # "kept" is still bound
    assert reel("-C", a, "remote", "remove", "--force", "origin").returncode == 0
    assert reel("-C", a, "remote", "list").stdout == b""
    still = reel("-C", a, "commit", "kept")  # still bound: no local commit can race a remote one
    assert still.returncode == 5 and b"E015" in still.stderr
    reel("-C", a, "commit", "local", check=True)


def test_racing_pushes_one_wins(tmp_path: Path, reel) -> None:
    remote = bare(tmp_path / "r.git")
    a = Repo.init(tmp_path / "a")
    sync.add_remote(a, "origin", str(remote))
    grow(a, 2, "base")
    sync.push(a, "origin")
    stores = [tmp_path / "a", sync.clone(str(remote), tmp_path / "b")[0].path.parent]
    heads = [grow(Repo.open(s), 20, f"racer{i}") for i, s in enumerate(stores)]
    env = {k: v for k, v in os.environ.items() if k != "REEL_DIR"}
    procs = [
        subprocess.Popen([REEL, "push"], cwd=s, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        for s in stores
    ]
    codes = [p.wait(timeout=60) for p in procs]
    for p in procs:
        p.stderr.close()
    assert sorted(codes) == [0, 5]
    winner = codes.index(0)
    pushed = Repo.open(stores[winner]).refs["refs/remotes/origin/heads/main"]
    assert pushed == heads[winner]
    loser = Repo.open(stores[1 - winner])
    assert loser.refs["refs/remotes/origin/heads/main"] != heads[1 - winner]
    fsck(remote)
    assert sync.fetch(loser, "origin").refs["refs/remotes/origin/heads/main"] == heads[winner]


def test_progress_is_shown_on_a_terminal_only(tmp_path: Path, reel) -> None:
    remote = bare(tmp_path / "r.git")
    a = Repo.init(tmp_path / "a")
    sync.add_remote(a, "origin", str(remote))
    grow(a, 30, "tty")
    sync.push(a, "origin")
    piped = reel("clone", str(remote), "piped", check=True)
    assert piped.stderr == b""
    env = {k: v for k, v in os.environ.items() if k != "REEL_DIR"}
    tty = subprocess.run(
        ["script", "-qec", f"{REEL} clone {remote} tty", "/dev/null"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        timeout=60,
    )
    assert tty.returncode == 0
    assert b"received 34 objects from origin" in tty.stdout and b"Counting objects" in tty.stdout
