"""`reel commit VIEW --remote R`: two machines commit the same synced view against a real target;
the remote trunk's compare-and-swap lets exactly one of them drain."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from conftest import REEL
from gitserver import bare, fsck, git
from target import Target, configure, pay_op

from reelstore import sync
from reelstore.api import Store
from reelstore.backend.repo import Repo
from reelstore.drain import recovery


def test_concurrent_commit_remote_drains_once(tmp_path: Path) -> None:
    remote = bare(tmp_path / "shared.git")
    with Target(tmp_path / "ledger.jsonl") as target:
        a_dir, b_dir = tmp_path / "a", tmp_path / "b"
        a = Store.init(a_dir)
        configure(a.repo.config, target.url)
        a.fork("pay").effect("http", pay_op(target.url, "blind"))  # blind: the target acts on every request
        sync.add_remote(a.repo, "origin", str(remote))
        sync.push(a.repo, "origin")
        b, _ = sync.clone(str(remote), b_dir)
        configure(b.config, target.url)
        before = {d: Repo.open(d).refs["refs/heads/main"] for d in (a_dir, b_dir)}
        assert before[a_dir] == before[b_dir]

        env = {k: v for k, v in os.environ.items() if k != "REEL_DIR"}
        procs = {
            d: subprocess.Popen(
                [REEL, "commit", "pay", "--remote", "origin"],
                cwd=d,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            for d in (a_dir, b_dir)
        }
        outcome = {d: (p.wait(timeout=60), p.stderr.read().decode()) for d, p in procs.items()}
        for p in procs.values():
            p.stdout.close()
            p.stderr.close()
        seen = "\n".join(
            [
                *(f"{d.name} exited {rc}: {err}" for d, (rc, err) in outcome.items()),
                f"target answered: {target.answers}",
                f"ledger: {target.ledger()}",
            ]
        )
        assert sorted(rc for rc, _ in outcome.values()) == [0, 5], seen
        assert target.count("/blind") == 1, seen

        winner = next(d for d, (rc, _) in outcome.items() if rc == 0)
        loser = next(d for d, (rc, _) in outcome.items() if rc == 5)
        assert "E015" in outcome[loser][1]
        won, lost = Repo.open(winner), Repo.open(loser)
        assert won.refs["refs/heads/main"] != before[winner] and won.refs.get("refs/views/pay") is None
        assert lost.refs["refs/heads/main"] == before[loser] and lost.refs.get("refs/views/pay") is not None
        fetched = sync.fetch(lost, "origin")
        remote_record = fetched.refs["refs/remotes/origin/heads/main"]
        assert remote_record == won.refs["refs/heads/main"]
        fsck(remote)
        assert git("--git-dir", str(remote), "rev-list", "--count", "refs/reel/heads/main").strip() == "2"
        assert "refs/reel/views/pay" not in git("--git-dir", str(remote), "for-each-ref")

        # one fetch catches the loser up: its trunk fast-forwards and its copy of the view is terminal
        assert [(t.trunk, t.status) for t in fetched.trunks] == [("main", "fast-forward")]
        assert lost.refs["refs/heads/main"] == remote_record and lost.refs.get("refs/views/pay") is None
        assert fetched.retired == {"pay": remote_record}
        proc = subprocess.run([REEL, "recover"], cwd=loser, env=env, capture_output=True, timeout=60)
        assert proc.returncode == 0, proc.stderr.decode()
        assert target.count("/blind") == 1  # the loser caught up, and still fired nothing


def test_a_record_from_a_remote_is_never_drained_again_here(tmp_path: Path) -> None:
    """The store that committed a record drains it; a store that receives it by clone or fetch does
    not, even through `reel recover` (otherwise a blind effect would fire once per machine)."""
    remote = bare(tmp_path / "shared.git")
    with Target(tmp_path / "ledger.jsonl") as target:
        a = Store.init(tmp_path / "a")
        configure(a.repo.config, target.url)
        sync.add_remote(a.repo, "origin", str(remote))
        a.fork("pay").effect("http", pay_op(target.url, "blind"))
        a.commit("pay")
        assert target.count("/blind") == 1
        sync.push(a.repo, "origin")

        b, _ = sync.clone(str(remote), tmp_path / "b")
        configure(b.config, target.url)
        env = {k: v for k, v in os.environ.items() if k != "REEL_DIR"}
        for args in (["recover"], ["--json", "ops"]):
            proc = subprocess.run([REEL, *args], cwd=tmp_path / "b", env=env, capture_output=True, timeout=60)
            assert proc.returncode == 0, proc.stderr.decode()
        assert '"op"' not in proc.stdout.decode()  # nothing is B's to drain
        assert target.count("/blind") == 1

        proc = subprocess.run([REEL, "recover"], cwd=tmp_path / "a", env=env, capture_output=True, timeout=60)
        assert proc.returncode == 0, proc.stderr.decode()
        assert target.count("/blind") == 1


def _won_then(action):  # noqa: ANN001, ANN202
    """A `commit --remote` fence that wins the remote trunk for real, then lets `action(store_path)` run as
    another process of the same store would, at the worst moment: after the remote win, before the local
    trunk moves."""

    class Fence:
        def __init__(self, repo: Repo) -> None:
            self.real = sync.remote_fence(repo, "origin")
            self.remote = self.real.remote
            self.seen: list[str] = []

        def __call__(self, trunk, old, new) -> None:  # noqa: ANN001
            self.real(trunk, old, new)
            try:
                self.seen.append(f"ran: {action(self.real.repo.path)}")
            except Exception as exc:  # noqa: BLE001  (what the racing writer met is the test's evidence)
                self.seen.append(f"refused: {type(exc).__name__}: {exc}")

    return Fence


def _bound_view_with_a_blind_effect(tmp_path: Path, target: Target) -> tuple[Store, Path]:
    remote = bare(tmp_path / "shared.git")
    a = Store.init(tmp_path / "a")
    configure(a.repo.config, target.url)
    a.fork("pay").effect("http", pay_op(target.url, "blind"))
    sync.add_remote(a.repo, "origin", str(remote))
    sync.push(a.repo, "origin")
    return a, remote


def test_a_fetch_racing_a_won_remote_commit_neither_drops_nor_doubles_the_drain(tmp_path: Path) -> None:
    """A fetch in another process, between the remote win and the local trunk move, used to fast-forward
    the trunk to the very record being committed (marked as fetched, so not this store's to drain): the
    commit then said E008 "committed by another process" and nothing ever sent the effect. The commit
    holds the trunk and view locks across the remote push, so the racing fetch cannot move them."""
    with Target(tmp_path / "ledger.jsonl") as target:
        a, _ = _bound_view_with_a_blind_effect(tmp_path, target)
        fence = _won_then(lambda path: sync.fetch(Repo.open(path), "origin").trunks)(a.repo)
        result = a.commit("pay", fence=fence)
        assert len(fence.seen) == 1 and "status='fast-forward'" not in fence.seen[0], fence.seen  # it could not move
        assert result.record is not None and [o.state for o in result.drain.outcomes] == ["succeeded"], fence.seen
        assert target.count("/blind") == 1, fence.seen
        assert Repo.open(tmp_path / "a").refs["refs/heads/main"] == result.record
        again = sync.fetch(Repo.open(tmp_path / "a"), "origin")  # the remote holds the same record
        assert [(t.status, t.new) for t in again.trunks] == [("up-to-date", result.record)]
        proc = subprocess.run(
            [REEL, "recover"],
            cwd=tmp_path / "a",
            capture_output=True,
            timeout=60,
            env={k: v for k, v in os.environ.items() if k != "REEL_DIR"},
        )
        assert proc.returncode == 0, proc.stderr.decode()
        assert target.count("/blind") == 1


def test_a_write_racing_a_won_remote_commit_cannot_undo_it(tmp_path: Path) -> None:
    """A write to the view between the remote win and the local trunk move used to fail the local step
    (E002 "nothing was committed") although the remote held the record: the effect was never sent, and
    the view could no longer be committed anywhere. Now the write is refused (the view ref is locked by
    the commit) and the commit lands and drains once."""
    from dataclasses import replace

    from reelstore.objects import View

    def write(path: Path) -> str:
        repo = Repo.open(path)
        current = repo.refs["refs/views/pay"]
        other = replace(repo.objects.get_as(current, View), effects=None)  # the effect dropped: a write
        repo.objects.put(other)
        repo.refs.set("refs/views/pay", other.id, current)
        return "the write landed"

    with Target(tmp_path / "ledger.jsonl") as target:
        a, _ = _bound_view_with_a_blind_effect(tmp_path, target)
        fence = _won_then(write)(a.repo)
        result = a.commit("pay", fence=fence)
        assert fence.seen and fence.seen[0].startswith("refused: LockHeld: E002"), fence.seen
        assert result.record is not None and [o.state for o in result.drain.outcomes] == ["succeeded"]
        assert target.count("/blind") == 1
        assert Repo.open(tmp_path / "a").refs.get("refs/views/pay") is None


def test_a_commit_killed_after_winning_the_remote_is_settled_by_fetch_and_drained_once(tmp_path: Path) -> None:
    """SIGKILL between the remote win and the local trunk move: the remote holds the record, this store's
    trunk does not, and nothing marked it as this store's to drain, so its effect was never sent (a later
    fetch took the record in as another store's). The commit's claim (`.reel/claims/main`) survives the
    kill; the next fetch moves the trunk to the record as committed here, and `reel recover` sends the
    effect, once."""
    env = {k: v for k, v in os.environ.items() if k != "REEL_DIR"}

    def reel(*args: str, **extra: str) -> subprocess.CompletedProcess:
        return subprocess.run([REEL, *args], cwd=tmp_path / "a", capture_output=True, timeout=60, env={**env, **extra})

    with Target(tmp_path / "ledger.jsonl") as target:
        _, remote = _bound_view_with_a_blind_effect(tmp_path, target)
        killed = reel("commit", "pay", "--remote", "origin", REEL_TEST_CRASH_AT="commit:fenced")
        assert killed.returncode == -9, killed.stderr.decode()
        assert git("--git-dir", str(remote), "rev-list", "--count", "refs/reel/heads/main").strip() == "2"
        assert (tmp_path / "a" / ".reel" / "claims" / "main").is_file() and target.count("/blind") == 0
        cleared = reel("gc", "--clear-stale-locks")  # the killed commit's ref locks
        assert cleared.returncode == 0, cleared.stderr.decode()
        again = reel("commit", "pay", "--remote", "origin")  # terminal, and it says what is still to do
        assert again.returncode == 8 and b"`reel fetch origin` makes it this store's commit" in again.stderr, (
            again.stderr.decode()
        )
        fetched = reel("fetch", "origin")
        assert fetched.returncode == 0, fetched.stderr.decode()
        assert b"now holds the record as committed here" in fetched.stdout + fetched.stderr
        assert not (tmp_path / "a" / ".reel" / "claims" / "main").exists()
        store = Repo.open(tmp_path / "a")
        assert store.refs.get("refs/views/pay") is None
        for _ in range(2):
            rec = reel("recover")
            assert rec.returncode == 0, rec.stderr.decode()
            assert target.count("/blind") == 1


def test_a_claim_the_remote_never_took_is_dropped_by_fetch(tmp_path: Path) -> None:
    """A commit killed before its push reached the remote leaves a claim for a record the remote does not
    hold: the fetch drops it (nothing was committed) and the view can be committed again."""
    from reelstore.errors import RemoteConflict
    from reelstore.kernel import claims
    from reelstore.objects import Hash

    with Target(tmp_path / "ledger.jsonl") as target:
        a, _ = _bound_view_with_a_blind_effect(tmp_path, target)
        head = a.repo.refs["refs/heads/main"]
        never = Hash.of(b"a record no push ever carried")
        claims.write(a.repo, claims.Claim("main", never, head, "pay", "origin"))
        with pytest.raises(RemoteConflict, match="reel fetch origin"):
            a.commit("pay", fence=sync.remote_fence(a.repo, "origin"))
        fetched = sync.fetch(a.repo, "origin")
        assert any("did not reach remote origin" in n for n in fetched.notes), fetched.notes
        result = a.commit("pay", fence=sync.remote_fence(a.repo, "origin"))
        assert result.record is not None and target.count("/blind") == 1


def test_a_push_whose_answer_was_lost_is_settled_by_fetch(tmp_path: Path) -> None:
    """The push landed but the commit saw only an error (E010, as when the connection drops before the
    answer): the commit fails with nothing moved here, the claim stays, and the fetch finds the record on
    the remote, makes it this store's commit, and recover sends the effect once."""
    from reelstore.errors import Unreachable

    class LostAnswer:
        def __init__(self, repo: Repo) -> None:
            self.real = sync.remote_fence(repo, "origin")
            self.remote = "origin"

        def __call__(self, trunk: str, old, new) -> None:  # noqa: ANN001
            self.real(trunk, old, new)
            raise Unreachable("the connection dropped before the answer")

    with Target(tmp_path / "ledger.jsonl") as target:
        a, _ = _bound_view_with_a_blind_effect(tmp_path, target)
        before = a.repo.refs["refs/heads/main"]
        with pytest.raises(Unreachable):
            a.commit("pay", fence=LostAnswer(a.repo))
        assert a.repo.refs["refs/heads/main"] == before and target.count("/blind") == 0
        fetched = sync.fetch(a.repo, "origin")
        assert any("now holds the record as committed here" in n for n in fetched.notes), fetched.notes
        for _ in range(2):
            recovery.recover(a.repo).check()
            assert target.count("/blind") == 1
