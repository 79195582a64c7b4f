"""Hand-off over a git remote: a view pushed by one store becomes live in another at its next fetch
(bound to that remote, as a clone checks views out), so it can be committed there with no ref moved
by hand; and two agents sharing one clone fetch concurrently without failing on each other's locks."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from conftest import REEL
from gitserver import bare
from target import Target, configure, pay_op

from reelstore import sync
from reelstore.api import Store
from reelstore.backend.repo import Repo
from reelstore.kernel import binding
from reelstore.kernel.views import load_live


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "REEL_DIR"}


def _two(tmp_path: Path, target: Target) -> tuple[Store, Store]:
    """A (init, pushed) and B (a clone made before A has any view)."""
    remote = bare(tmp_path / "shared.git")
    a = Store.init(tmp_path / "a")
    configure(a.repo.config, target.url)
    sync.add_remote(a.repo, "origin", str(remote))
    sync.push(a.repo, "origin")
    b_repo, _ = sync.clone(str(remote), tmp_path / "b")
    configure(b_repo.config, target.url)
    return a, Store(b_repo)


def test_a_fetched_view_is_live_and_bound_and_commits_once(tmp_path: Path) -> None:
    with Target(tmp_path / "ledger.jsonl") as target:
        a, b = _two(tmp_path, target)
        pay = a.fork("pay")
        pay.put("invoice.txt", "42")
        pay.effect("http", pay_op(target.url, "blind"))
        sync.push(a.repo, "origin")
        assert b.repo.refs.get("refs/views/pay") is None

        proc = subprocess.run([REEL, "fetch"], cwd=tmp_path / "b", env=_env(), capture_output=True, timeout=60)
        assert proc.returncode == 0, proc.stderr.decode()
        assert "view pay is live here, bound to origin" in proc.stdout.decode()
        assert b.repo.refs["refs/views/pay"] == a.repo.refs["refs/views/pay"]
        assert binding.bound_remote(b.repo, load_live(b.repo, "pay").view) == "origin"
        assert b.handle("pay").get("invoice.txt") == b"42"

        again = sync.fetch(b.repo, "origin")  # already live here: not made again
        assert again.materialized == []

        res = b.commit("pay", remote="origin")
        assert [o.state for o in res.drain.outcomes] == ["succeeded"]
        assert target.count("/blind") == 1
        # A learns the hand-off landed: its copy retires, and it made nothing anew
        fetched = sync.fetch(a.repo, "origin")
        assert fetched.retired == {"pay": res.record} and fetched.materialized == []
        assert a.repo.refs.get("refs/views/pay") is None
        proc = subprocess.run(
            [REEL, "commit", "pay", "--remote", "origin"],
            cwd=tmp_path / "a",
            env=_env(),
            capture_output=True,
            timeout=60,
        )
        assert proc.returncode == 8 and b"E008" in proc.stderr
        assert target.count("/blind") == 1


def test_a_view_ended_here_is_not_made_live_again(tmp_path: Path) -> None:
    """B unbinds and aborts its copy of a view the remote still holds: the next fetch leaves it
    aborted. A view whose record is already on the remote's trunk is not made live either."""
    with Target(tmp_path / "ledger.jsonl") as target:
        a, b = _two(tmp_path, target)
        a.fork("keep").put("k", "1")
        a.fork("landed").put("l", "1")
        sync.push(a.repo, "origin")
        first = sync.fetch(b.repo, "origin")
        assert sorted(first.materialized) == ["keep", "landed"]

        binding.unbind(b.repo, load_live(b.repo, "keep").view)
        b.abort("keep")
        # `landed` is committed at the remote by A; the remote's view ref stays until B fetches
        a.commit("landed", remote="origin")
        b.repo.refs.delete("refs/views/landed")  # as on a store that never had it
        later = sync.fetch(b.repo, "origin")
        assert later.materialized == []
        assert b.repo.refs.get("refs/views/keep") is None and b.repo.refs.get("refs/views/landed") is None
        assert json.loads(json.dumps(later.to_json()))["materialized"] == []


def test_two_agents_on_one_clone_fetch_at_once(tmp_path: Path) -> None:
    """Eight concurrent `reel fetch` in one clone, while the remote holds new views: all exit 0 (before,
    some failed with E002 on a remote-tracking ref another held), and every view is live once."""
    with Target(tmp_path / "ledger.jsonl") as target:
        a, b = _two(tmp_path, target)
        for i in range(8):
            a.fork(f"w{i}").put("f", str(i))
        sync.push(a.repo, "origin")
        procs = [
            subprocess.Popen(
                [REEL, "fetch", "-q"], cwd=tmp_path / "b", env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE
            )
            for _ in range(8)
        ]
        outs = [(p.wait(timeout=120), p.stdout.read().decode(), p.stderr.read().decode()) for p in procs]
        for p in procs:
            p.stdout.close()
            p.stderr.close()
        assert [rc for rc, _, _ in outs] == [0] * 8, outs
        said = "".join(out for _, out, _ in outs)
        assert sorted(line for line in said.splitlines() if line.startswith("view ")) == [
            f"view w{i} is live here, bound to origin" for i in range(8)
        ]
        repo = Repo.open(tmp_path / "b")
        assert sorted(name for name, _ in repo.refs.list("refs/views/")) == [f"refs/views/w{i}" for i in range(8)]


def test_a_fetch_leaves_the_claim_of_a_running_commit_alone(tmp_path: Path) -> None:
    """Another agent's fetch in the same clone, while a `commit --remote` holds its claim (before its
    push, and after its push but before the local trunk moves): the fetch neither reports the commit
    as lost nor fails on the locked trunk, and the commit lands and drains once."""
    from reelstore.kernel import claims
    from reelstore.kernel import verbs as kernel

    with Target(tmp_path / "ledger.jsonl") as target:
        _, b = _two(tmp_path, target)
        b.fork("pay").effect("http", pay_op(target.url, "blind"))
        real = sync.remote_fence(b.repo, "origin")
        seen: list[tuple[str, list[str], bool]] = []

        class Fence:
            remote = "origin"

            def __call__(self, trunk: str, old, new) -> None:  # noqa: ANN001
                other = Repo.open(tmp_path / "b")  # the other agent: its own handle on the same clone
                seen.append(("before", sync.fetch(other, "origin").notes, claims.read(b.repo, trunk) is not None))
                real(trunk, old, new)
                after = sync.fetch(other, "origin")
                seen.append(("after", after.notes, claims.read(b.repo, trunk) is not None))

        res = kernel.commit(b.repo, "pay", fence=Fence())
        assert seen == [("before", [], True), ("after", [], True)]
        assert [o.state for o in res.drain.outcomes] == ["succeeded"] and target.count("/blind") == 1
        assert claims.read(b.repo, "main") is None
        assert b.repo.refs["refs/heads/main"] == res.record
