"""Exactly once across machines, black-box: two stores syncing through one git remote, a view with a
keyed, a queryable and a blind effect against a loopback ledger. However the second store tries to
commit the view again, each effect reaches the target once, and the keyed target sees one key."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from conftest import REEL
from gitserver import GitDaemon, bare, git
from target import Target, configure, pay_op

from reelstore.backend.repo import Repo

TIERS = ("keyed", "queryable", "blind")
ROUNDS = int(os.environ.get("REEL_SYNC_RACE_ROUNDS", "5"))
ROUTES = ("/keyed", "/query", "/blind")


def reel(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "REEL_DIR"}
    return subprocess.run([REEL, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def ok(cwd: Path, *args: str) -> str:
    proc = reel(cwd, *args)
    assert proc.returncode == 0, f"reel {' '.join(args)} exited {proc.returncode}: {proc.stderr}"
    return proc.stdout


def refused(proc: subprocess.CompletedProcess[str], status: int, code: str) -> str:
    assert proc.returncode == status and proc.stderr.startswith(f"error: {code}: "), (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr and "b'" not in proc.stderr
    return proc.stderr


def one_request_per_effect(target: Target) -> None:
    counts = {route: target.count(route) for route in ROUTES}
    assert counts == dict.fromkeys(ROUTES, 1), counts
    keys = {e["key"] for e in target.ledger() if e["path"].startswith("/keyed")}
    assert len(keys) == 1 and next(iter(keys)).startswith("op_"), keys


def laptop(tmp_path: Path, target: Target, url: str) -> tuple[Path, Path]:
    """The issue's sequence up to the clone: fork, three effects, push; the server clones."""
    a = tmp_path / "laptop"
    ok(tmp_path, "init", str(a))
    configure(Repo.open(a).config, target.url)
    ok(a, "fork", "pay")
    for tier in TIERS:
        ok(a, "effect", "pay", "--adapter", "http", "--op", json.dumps(pay_op(target.url, tier)))
    ok(a, "remote", "add", "origin", url)
    ok(a, "push")
    ok(tmp_path, "clone", url, "d2")
    d2 = tmp_path / "d2"
    configure(Repo.open(d2).config, target.url)
    return a, d2


@pytest.fixture
def served(tmp_path: Path):
    base = tmp_path / "srv"
    base.mkdir()
    bare(base / "shared.git")
    daemon = GitDaemon(base).start()
    try:
        yield base / "shared.git", daemon.url("shared.git")
    finally:
        daemon.stop()


def test_the_issue_scenario_fires_each_effect_once(tmp_path: Path, served: tuple[Path, str]) -> None:
    remote, url = served
    with Target(tmp_path / "ledger.jsonl") as target:
        a, d2 = laptop(tmp_path, target, url)
        views = ok(d2, "views")
        assert "bound to origin" in views and "3 effects" in views

        # the cloned trunk tracks origin, so d2's plain commit would go through the remote, but the
        # laptop wins first
        won = json.loads(ok(a, "--json", "commit", "pay", "--remote", "origin"))
        assert [o["state"] for o in won["drain"]["outcomes"]] == ["succeeded"] * 3
        record = won["record"]
        one_request_per_effect(target)
        assert "refs/reel/views/pay" not in git("--git-dir", str(remote), "for-each-ref")

        # every way d2 can try, before and after catching up
        stale = refused(reel(d2, "commit", "pay", "--remote", "origin"), 5, "E015")
        assert "reel fetch origin" in stale
        refused(reel(d2, "commit", "pay"), 5, "E015")
        fetched = ok(d2, "fetch")
        assert "trunk main fast-forwarded to" in fetched and f"view pay was committed as {record}" in fetched
        for attempt in (
            ["commit", "pay"],
            ["commit", "pay", "--remote", "origin"],
            ["status", "pay"],
            ["abort", "pay"],
            ["views", "--unbind", "pay"],
        ):
            err = refused(reel(d2, *attempt), 8, "E008")
            assert f"view 'pay' was committed as {record}" in err
        assert "pay" not in ok(d2, "views")
        log = json.loads(ok(d2, "--json", "log"))["records"]
        assert log[0]["record"] == record and log[0]["view"] == "pay"
        ok(d2, "recover")  # the record came from origin: its drain is not d2's
        one_request_per_effect(target)

        # a later clone sees no live view to commit
        ok(tmp_path, "clone", url, "d3")
        d3 = tmp_path / "d3"
        configure(Repo.open(d3).config, target.url)
        assert "pay" not in ok(d3, "views")
        refused(reel(d3, "commit", "pay"), 4, "E001")  # d3 never had a copy to commit
        ok(d3, "recover")
        one_request_per_effect(target)


def test_unbinding_is_the_one_way_to_commit_locally_and_the_key_stays_the_same(
    tmp_path: Path, served: tuple[Path, str]
) -> None:
    """A bound view refuses a plain local commit (E015 naming `--remote`); only an explicit, dangerous
    unbind lets it through, and then the keyed target still sees the same key from both machines."""
    _, url = served
    with Target(tmp_path / "ledger.jsonl") as target:
        a, d2 = laptop(tmp_path, target, url)
        Repo.open(d2).config.unset("trunk.main.remote")  # no tracking default: the binding alone decides
        err = refused(reel(d2, "commit", "pay"), 5, "E015")
        assert "reel commit pay --remote origin" in err
        assert target.requests == 0
        ok(d2, "views", "--unbind", "pay")
        assert "bound to" not in ok(d2, "views")
        local = json.loads(ok(d2, "--json", "commit", "pay"))  # the user accepted the danger
        refused(reel(a, "commit", "pay"), 5, "E015")  # the laptop's own copy is still bound
        won = json.loads(ok(a, "--json", "commit", "pay", "--remote", "origin"))
        assert won["record"] != local["record"]
        # both machines sent the keyed effect under one operation id, its idempotency key, so the
        # keyed target acted once; the same holds for every effect of the view
        ops = [[o["op"] for o in doc["drain"]["outcomes"]] for doc in (local, won)]
        assert ops[0] == ops[1] and len(set(ops[0])) == 3
        keys = [e["key"] for e in target.ledger() if e["path"].startswith("/keyed")]
        assert target.count("/keyed") == 1 and keys == [ops[0][0]]


def test_an_aborted_bound_view_is_gone_from_the_remote_and_from_fresh_clones(
    tmp_path: Path, served: tuple[Path, str]
) -> None:
    remote, url = served
    with Target(tmp_path / "ledger.jsonl") as target:
        a, d2 = laptop(tmp_path, target, url)
        assert "aborted view pay" in ok(a, "abort", "pay")
        assert "refs/reel/views/pay" not in git("--git-dir", str(remote), "for-each-ref")
        # d2 still has its clone's copy: committing it at the remote is refused, and a prune aborts it
        err = refused(reel(d2, "commit", "pay", "--remote", "origin"), 5, "E015")
        assert "refs/reel/views/pay on remote origin moved" in err and "reel fetch origin" in err
        assert "refs/views/pay is gone from origin" in ok(d2, "fetch")
        assert "gone  refs/views/pay" in ok(d2, "push")  # an aborted view is never pushed back
        assert "refs/reel/views/pay" not in git("--git-dir", str(remote), "for-each-ref")
        err = refused(reel(d2, "commit", "pay", "--remote", "origin"), 5, "E015")
        assert "no longer on remote origin" in err
        pruned = ok(d2, "fetch", "--prune")
        assert "aborted view pay" in pruned and "pruned refs/remotes/origin/views/pay" in pruned
        refused(reel(d2, "commit", "pay"), 8, "E008")
        ok(tmp_path, "clone", url, "d3")
        assert "pay" not in ok(tmp_path / "d3", "views")
        assert target.requests == 0


def test_abort_of_a_bound_view_refuses_while_the_remote_is_unreachable(tmp_path: Path) -> None:
    remote = bare(tmp_path / "shared.git")
    with Target(tmp_path / "ledger.jsonl") as target:
        a, _ = laptop(tmp_path, target, str(remote))
        remote.rename(tmp_path / "moved.git")
        refused(reel(a, "abort", "pay"), 4, "E010")
        assert "pay" in ok(a, "views")  # nothing was aborted: the remote copy could still be committed
        (tmp_path / "moved.git").rename(remote)
        ok(a, "abort", "pay")
        assert "refs/reel/views/pay" not in git("--git-dir", str(remote), "for-each-ref")


def test_three_clones_commit_the_same_view_at_once(tmp_path: Path, served: tuple[Path, str]) -> None:
    """ROUNDS rounds (5 in CI; 20 or more with REEL_SYNC_RACE_ROUNDS=20): each round, three fresh
    clones race a commit of one view (their trunks track origin, so a plain commit goes through the
    remote); exactly one drains, the others lose the remote CAS (E015), and after a fetch each sees
    the view committed (E008)."""
    _, url = served
    with Target(tmp_path / "ledger.jsonl") as target:
        a = tmp_path / "origin-store"
        ok(tmp_path, "init", str(a))
        configure(Repo.open(a).config, target.url)
        ok(a, "remote", "add", "--track", "origin", url)
        env = {k: v for k, v in os.environ.items() if k != "REEL_DIR"}
        for round_ in range(ROUNDS):
            view = f"pay{round_}"
            ok(a, "fork", view)
            ok(a, "effect", view, "--adapter", "http", "--op", json.dumps(pay_op(target.url, "blind", round_)))
            ok(a, "push")
            clones = []
            for i in range(3):
                ok(tmp_path, "clone", url, f"r{round_}c{i}")
                clones.append(tmp_path / f"r{round_}c{i}")
                configure(Repo.open(clones[-1]).config, target.url)
            procs = [
                subprocess.Popen(
                    [REEL, "commit", view], cwd=c, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
                )
                for c in clones
            ]
            results = [(p.wait(timeout=120), p.communicate()[1]) for p in procs]
            assert sorted(rc for rc, _ in results) == [0, 5, 5], results
            assert all(err.startswith("error: E015: ") for rc, err in results if rc), results
            assert target.count("/blind") == round_ + 1
            for c in clones:
                ok(c, "fetch")
                refused(reel(c, "commit", view), 8, "E008")
            ok(a, "fetch")
            refused(reel(a, "commit", view), 8, "E008")
        assert target.count("/blind") == ROUNDS
