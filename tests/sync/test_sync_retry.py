"""`reel commit --remote R --retry N`: stores racing for one synced trunk fetch, replay and try again.

Four processes, each its own clone of one real bare git remote, commit views with a blind effect (the
target acts on every request, so a duplicate would show in its ledger) and a file of their own: every
commit lands within its retries, every effect is in the ledger exactly once, and the remote trunk
holds every file (each loser's changes were replayed onto the winner's record)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REEL
from gitserver import bare, fsck, git
from target import Target, configure, pay_op

from reelstore import sync
from reelstore.api import Store
from reelstore.backend.repo import Repo
from reelstore.errors import BadInput, RemoteConflict, RemoteRaceLost
from reelstore.kernel import verbs as kernel
from reelstore.sync.retry import lost_race, wait

WORKERS = 4
COMMITS = 5
RETRIES = 40

_WORKER = """
import json, sys
from reelstore.api import Store
store = Store.open(sys.argv[1])
worker, url, commits, retries = sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
done = []
for n in range(commits):
    name = f"{worker}-{n}"
    view = store.fork(name)
    view.put(f"{worker}/{n}.txt", name)
    view.effect("http", {"method": "POST", "url": f"{url}/blind/pay", "json": {"view": name}})
    res = store.commit(name, remote="origin", retry=retries)
    done.append([name, res.record.hex(), [o.state for o in res.drain.outcomes]])
print(json.dumps(done))
"""


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "REEL_DIR"}


def _origin(tmp_path: Path, target: Target) -> tuple[Path, Store]:
    remote = bare(tmp_path / "shared.git")
    first = Store.init(tmp_path / "first")
    configure(first.repo.config, target.url)
    sync.add_remote(first.repo, "origin", str(remote))
    sync.push(first.repo, "origin")
    return remote, first


def test_four_processes_racing_every_commit_lands_once(tmp_path: Path) -> None:
    with Target(tmp_path / "ledger.jsonl") as target:
        remote, first = _origin(tmp_path, target)
        dirs = []
        for k in range(WORKERS):
            repo, _ = sync.clone(str(remote), tmp_path / f"w{k}")
            configure(repo.config, target.url)
            dirs.append(tmp_path / f"w{k}")
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", _WORKER, str(d), f"w{k}", target.url, str(COMMITS), str(RETRIES)],
                env=_env(),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            for k, d in enumerate(dirs)
        ]
        outs = [(p.wait(timeout=120), p.stdout.read().decode(), p.stderr.read().decode()) for p in procs]
        for p in procs:
            p.stdout.close()
            p.stderr.close()
        assert [rc for rc, _, _ in outs] == [0] * WORKERS, outs
        landed = [entry for _, out, _ in outs for entry in json.loads(out)]
        assert len(landed) == WORKERS * COMMITS
        assert all(states == ["succeeded"] for _, _, states in landed), landed

        # the ledger: every commit's one blind effect, exactly once
        sent = sorted(json.loads(e["body"])["view"] for e in target.ledger())
        assert sent == sorted(name for name, _, _ in landed)

        # the remote trunk: one record per commit, every worker's every file replayed onto it
        fetched = sync.fetch(first.repo, "origin")
        assert [(t.trunk, t.status) for t in fetched.trunks] == [("main", "fast-forward")]
        records = first.log("main")
        assert {e.record.hex() for e in records} >= {record for _, record, _ in landed}
        assert len(records) == WORKERS * COMMITS + 1
        names = {path for path, _ in first.fork("check").ls()}
        assert names == {f"w{k}/{n}.txt" for k in range(WORKERS) for n in range(COMMITS)}
        fsck(remote)
        assert git("--git-dir", str(remote), "for-each-ref", "refs/reel/views/").strip() == ""


def test_cli_retry_fetches_and_replays_after_a_lost_race(tmp_path: Path) -> None:
    with Target(tmp_path / "ledger.jsonl") as target:
        remote, first = _origin(tmp_path, target)
        b_repo, _ = sync.clone(str(remote), tmp_path / "b")
        configure(b_repo.config, target.url)
        b = Store(b_repo)
        won = first.fork("a")
        won.put("a.txt", "a")
        first.commit("a", remote="origin")  # first moves the remote trunk: b's next try loses
        lost = b.fork("b")
        lost.put("b.txt", "b")
        lost.effect("http", pay_op(target.url, "blind"))

        proc = subprocess.run(
            [REEL, "commit", "b", "--remote", "origin"], cwd=tmp_path / "b", env=_env(), capture_output=True, timeout=60
        )
        assert proc.returncode == 5 and b"E015" in proc.stderr, proc.stderr.decode()
        assert target.count("/blind") == 0

        proc = subprocess.run(
            [REEL, "--json", "commit", "b", "--retry", "3"],
            cwd=tmp_path / "b",
            env=_env(),
            capture_output=True,
            timeout=60,
        )
        assert proc.returncode == 0, proc.stderr.decode()
        doc = json.loads(proc.stdout)
        assert doc["remote"] == "origin"
        assert len(doc["notes"]) == 1 and doc["notes"][0].startswith("try 1 lost the race on remote origin")
        assert target.count("/blind") == 1
        assert Repo.open(tmp_path / "b").refs["refs/heads/main"].hex() == doc["record"]
        names = {path for path, _ in b.fork("check").ls()}
        assert names == {"a.txt", "b.txt"}


def test_retry_is_bounded_and_says_how_often_it_tried(tmp_path: Path) -> None:
    """A store whose trunk cannot catch up (it diverged from the remote's) loses every try: after
    1 + N tries the commit fails with E015, nothing sent."""
    with Target(tmp_path / "ledger.jsonl") as target:
        remote, first = _origin(tmp_path, target)
        b_repo, _ = sync.clone(str(remote), tmp_path / "b")
        b = Store(b_repo)
        first.fork("a").put("a.txt", "a")
        first.commit("a", remote="origin")
        b.fork("local").put("l.txt", "l")
        kernel.commit(b.repo, "local")  # a record the remote never sees: b's trunk diverged
        b.fork("b").effect("http", pay_op(target.url, "blind"))
        with pytest.raises(RemoteConflict) as caught:
            b.commit("b", remote="origin", retry=2)
        assert caught.value.details["tries"] == 3
        assert target.count("/blind") == 0
        assert b.repo.refs.get("refs/views/b") is not None


def test_retry_needs_a_remote_and_a_sane_count(tmp_path: Path) -> None:
    store = Store.init(tmp_path / "s")
    store.fork("v")
    with pytest.raises(BadInput, match="remote"):
        store.commit("v", retry=2)
    with pytest.raises(BadInput, match="retry"):
        store.commit("v", remote=None, fence=_Named("x"), retry=-1)
    proc = subprocess.run(
        [REEL, "commit", "v", "--retry", "2"], cwd=tmp_path / "s", env=_env(), capture_output=True, timeout=60
    )
    assert proc.returncode == 6 and b"E014" in proc.stderr and b"--remote" in proc.stderr, proc.stderr
    assert store.repo.refs.get("refs/views/v") is not None


class _Named:
    """A fence that names a remote and never runs (the count is refused first)."""

    def __init__(self, remote: str) -> None:
        self.remote = remote

    def __call__(self, *_: object) -> None:
        raise AssertionError("the fence ran")


def test_only_a_lost_race_is_retried_and_waits_are_jittered() -> None:
    assert lost_race(RemoteRaceLost("moved", ref="refs/heads/main"))
    assert lost_race(RemoteRaceLost("unsettled claim", trunk="main"))
    assert not lost_race(RemoteConflict("bound elsewhere", view="pay", remote="origin"))
    assert not lost_race(RemoteConflict("refused for good", refs=["refs/reel/heads/main"]))  # the class decides
    waits = [wait(3) for _ in range(200)]
    assert all(0 <= w < 0.4 for w in waits) and len(set(waits)) > 150
    assert max(wait(30) for _ in range(50)) <= 2.0


def test_async_store_commit_retries_the_same_way(tmp_path: Path) -> None:
    """`AsyncStore.commit(name, retry=N)` goes through the same loop: a lost race, a fetch, a win."""
    import asyncio

    from reelstore.aio import AsyncStore

    with Target(tmp_path / "ledger.jsonl") as target:
        remote, first = _origin(tmp_path, target)
        b_repo, _ = sync.clone(str(remote), tmp_path / "b")
        configure(b_repo.config, target.url)
        first.fork("a").put("a.txt", "a")
        first.commit("a", remote="origin")
        b = Store(b_repo)
        b.fork("b").effect("http", pay_op(target.url, "blind"))

        async def go() -> kernel.CommitResult:
            store = AsyncStore(Store.open(tmp_path / "b"))
            try:
                return await store.commit("b", retry=2)
            finally:
                store.close()

        res = asyncio.run(go())
        assert res.remote == "origin" and len(res.notes) == 1 and "lost the race" in res.notes[0]
        assert [o.state for o in res.drain.outcomes] == ["succeeded"] and target.count("/blind") == 1
