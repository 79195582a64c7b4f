"""Each operation id reaches its target at most once, whatever brings its effect back.

A real HTTP target on 127.0.0.1 keeps the ledger (the oracle); the store runs through the real `reel`
and the Python API. Repros: a task key queued again (after commit, or while pending elsewhere), an
aborted view brought back by `update-ref` or by a bundle made before the abort, a snapshot carried
by a bundle into a second store, a committed effect written back into a view by hand, and an agent
killed (SIGKILL) and restarted at random points.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import HELPERS, REEL
from target import Target, configure, pay_op

from reelstore.api import Store
from reelstore.drain.owners import task_op_id
from reelstore.errors import BadInput, ViewTerminal
from reelstore.kernel import snapshot

AGENT = HELPERS / "refund_agent.py"


def reel(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("REEL_DIR", "REEL_TEST_CRASH_AT")}
    return subprocess.run([REEL, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60)


def blind(url: str, n: int = 1) -> dict:
    return {"method": "POST", "url": f"{url}/blind/refund", "json": {"n": n}}


def ref(cwd: Path, name: str) -> str:
    out = reel(cwd, "show-ref", "--verify", "-s", name)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_a_task_key_committed_is_refused_at_admission_naming_its_record(tmp_path: Path) -> None:
    with Target(tmp_path / "ledger.jsonl") as target:
        store = Store.init(tmp_path / "s")
        configure(store.repo.config, target.url)
        first = store.fork("a")
        first.effect("http", pay_op(target.url, "keyed"), key="refund:ticket-42")
        result = first.commit()
        again = store.fork("b")
        with pytest.raises(ViewTerminal) as caught:
            again.effect("http", pay_op(target.url, "keyed"), key="refund:ticket-42")
        assert caught.value.details["record"] == result.record.hex()
        assert caught.value.details["op"] == task_op_id("main", "refund:ticket-42")
        assert [e["key"] for e in target.ledger()] == [task_op_id("main", "refund:ticket-42")]


def test_a_task_key_pending_in_two_views_is_refused_at_the_second_commit(tmp_path: Path) -> None:
    with Target(tmp_path / "ledger.jsonl") as target:
        store = Store.init(tmp_path / "s")
        for name in ("a", "b"):
            store.fork(name).effect("http", blind(target.url), key="refund:ticket-7")
        won = store.commit("a")
        with pytest.raises(ViewTerminal) as caught:
            store.commit("b")
        assert caught.value.details["record"] == won.record.hex()
        assert target.count("/blind") == 1
        assert [v.name for v in store.views()] == ["b"]


def test_one_task_key_once_per_view_and_well_formed(tmp_path: Path) -> None:
    store = Store.init(tmp_path)
    view = store.fork("a")
    op = {"method": "POST", "url": "http://127.0.0.1:9/blind/x"}
    view.effect("http", op, key="t1")
    with pytest.raises(BadInput):
        view.effect("http", op, key="t1")
    for bad in ("", "x" * 513, "a\nb"):
        with pytest.raises(BadInput) as caught:
            view.effect("http", op, key=bad)
        assert caught.value.details["field"] == "key"


def test_a_task_key_from_the_cli_names_its_operation(tmp_path: Path) -> None:
    assert reel(tmp_path, "init").returncode == 0
    assert reel(tmp_path, "fork", "a").returncode == 0
    out = reel(
        tmp_path,
        "effect",
        "a",
        "--adapter",
        "fs",
        "--op",
        '{"action": "write", "path": "x", "content": "1"}',
        "--key",
        "write:x",
        "--json",
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["op"] == task_op_id("main", "write:x")
    assert reel(tmp_path, "commit", "a").returncode == 0
    assert reel(tmp_path, "fork", "b").returncode == 0
    again = reel(
        tmp_path,
        "effect",
        "b",
        "--adapter",
        "fs",
        "--op",
        '{"action": "write", "path": "x", "content": "2"}',
        "--key",
        "write:x",
    )
    assert again.returncode == 8 and "E008" in again.stderr and "write:x" in again.stderr


def test_an_aborted_view_written_back_by_update_ref_is_refused(tmp_path: Path) -> None:
    with Target(tmp_path / "ledger.jsonl") as target:
        assert reel(tmp_path, "init").returncode == 0
        assert reel(tmp_path, "fork", "v").returncode == 0
        assert reel(tmp_path, "effect", "v", "--adapter", "http", "--op", json.dumps(blind(target.url))).returncode == 0
        old = ref(tmp_path, "refs/views/v")
        assert reel(tmp_path, "abort", "v").returncode == 0
        assert reel(tmp_path, "update-ref", "refs/views/v", old, "").returncode == 0
        out = reel(tmp_path, "commit", "v")
        assert out.returncode == 8, out.stderr
        assert "aborted" in out.stderr and old in out.stderr
        assert target.count("/blind") == 0


def test_a_bundle_made_before_an_abort_cannot_bring_its_effect_back(tmp_path: Path) -> None:
    with Target(tmp_path / "ledger.jsonl") as target:
        assert reel(tmp_path, "init").returncode == 0
        assert reel(tmp_path, "fork", "v").returncode == 0
        assert reel(tmp_path, "effect", "v", "--adapter", "http", "--op", json.dumps(blind(target.url))).returncode == 0
        assert reel(tmp_path, "bundle", "create", "b.bundle", "refs/views/v").returncode == 0
        assert reel(tmp_path, "abort", "v").returncode == 0
        out = reel(tmp_path, "bundle", "unbundle", "--update-refs", "--with-pending-effects", "b.bundle")
        assert out.returncode == 0, out.stderr
        assert reel(tmp_path, "commit", "v").returncode == 8
        assert target.count("/blind") == 0


def test_a_snapshot_travelling_in_a_bundle_is_held_back(tmp_path: Path) -> None:
    """Store A snapshots a view with a blind effect and bundles it; store B must not be able to restore
    and commit it while A commits the view."""
    a, b = tmp_path / "a", tmp_path / "b"
    with Target(tmp_path / "ledger.jsonl") as target:
        for d in (a, b):
            d.mkdir()
            assert reel(d, "init").returncode == 0
        assert reel(a, "fork", "v").returncode == 0
        assert reel(a, "effect", "v", "--adapter", "http", "--op", json.dumps(blind(target.url))).returncode == 0
        assert reel(a, "snapshot", "v", "s1").returncode == 0
        assert reel(a, "bundle", "create", str(tmp_path / "f"), "refs/views/v", "refs/snapshots/s1").returncode == 0
        out = reel(b, "bundle", "unbundle", "--update-refs", "--json", str(tmp_path / "f"))
        assert sorted(json.loads(out.stdout)["held_back"]) == ["refs/snapshots/s1", "refs/views/v"], out.stdout
        assert reel(a, "commit", "v").returncode == 0
        assert reel(b, "restore", "s1", "--as", "v2").returncode == 4
        assert target.count("/blind") == 1


def test_a_committed_effect_written_back_into_a_view_is_refused(tmp_path: Path) -> None:
    """A snapshot taken before the commit, pointed at by a view ref by hand: its effect is the committed
    one, so the commit is refused naming the record that holds it."""
    with Target(tmp_path / "ledger.jsonl") as target:
        assert reel(tmp_path, "init").returncode == 0
        assert reel(tmp_path, "fork", "v").returncode == 0
        assert reel(tmp_path, "effect", "v", "--adapter", "http", "--op", json.dumps(blind(target.url))).returncode == 0
        assert reel(tmp_path, "snapshot", "v", "s1").returncode == 0
        assert reel(tmp_path, "commit", "v").returncode == 0
        record = ref(tmp_path, "refs/heads/main")
        assert reel(tmp_path, "update-ref", "refs/views/w", ref(tmp_path, "refs/snapshots/s1"), "").returncode == 0
        out = reel(tmp_path, "commit", "w")
        assert out.returncode == 8 and record in out.stderr, out.stderr
        assert target.count("/blind") == 1


def test_a_restored_snapshot_of_an_aborted_view_still_fires_once(tmp_path: Path) -> None:
    """Restoring is the deliberate way back: a new fork, its effect pending for the user to decide."""
    with Target(tmp_path / "ledger.jsonl") as target:
        store = Store.init(tmp_path / "s")
        store.fork("v").effect("http", blind(target.url))
        store.repo.refs.set("refs/snapshots/s", store.repo.refs["refs/views/v"], None)
        store.abort("v")
        snapshot.restore(store.repo, "s", "v2")
        store.commit("v2")
        assert target.count("/blind") == 1
        assert len(snapshot.restore(store.repo, "s", "v3").left_out) == 1
        store.commit("v3")
        assert target.count("/blind") == 1


def test_an_agent_killed_at_random_points_refunds_each_task_once(tmp_path: Path) -> None:
    """The restart-safe agent loop (refund_agent.py) SIGKILLed 50 times at random points, then run to
    the end: the blind ledger holds each task's refund at most once, and exactly once unless the
    kill fell between the journaled intent and the answer (the operation is then `unknown` and
    never resent: an operator settles it)."""
    tasks, rng = 6, random.Random(int.from_bytes(os.urandom(4), "big"))
    store = tmp_path / "s"
    Store.init(store)
    with Target(tmp_path / "ledger.jsonl") as target:
        argv = [sys.executable, str(AGENT), str(store), target.url, str(tasks)]
        start = time.monotonic()
        for _ in range(50):
            proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            time.sleep(rng.uniform(0.1, 0.5))
            proc.send_signal(signal.SIGKILL)
            _, err = proc.communicate(timeout=30)
            assert proc.returncode in (0, -9), err.decode()[-2000:]
            if time.monotonic() - start > 22:
                break
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0 and "done" in done.stdout, done.stderr[-2000:]
        seen = [json.loads(e["body"])["task"] for e in target.ledger()]
    for n in range(tasks):
        assert seen.count(n) <= 1, f"task {n} refunded {seen.count(n)} times"
    ops = {o.effect.meta.get("key"): o.state for o in Store.open(store).ops()}
    assert sorted(ops) == sorted(f"refund:ticket-{n}" for n in range(tasks))
    for n in range(tasks):
        state = ops[f"refund:ticket-{n}"]
        assert seen.count(n) == 1 or state == "unknown", (n, state, seen)


WRITER = HELPERS / "commit_writer.py"


def test_a_kill_9_soak_of_200_commits_needs_no_operator(tmp_path: Path) -> None:
    """Writers SIGKILLed at random times, and every other one while it holds a ref lock, until 200
    commits landed: no run fails on a lock (a dead holder's lock is broken by the next writer, which
    says so in the verb log), and nothing needs `reel gc --clear-stale-locks`."""
    rng = random.Random(int.from_bytes(os.urandom(4), "big"))
    store = tmp_path / "s"
    Store.init(store).repo.config.set("core.fsync", "false")  # a SIGKILL keeps the page cache
    kills, finished = 0, None
    for run in range(200):
        argv = [sys.executable, str(WRITER), str(store), "200"]
        if run % 2 or run < 20:  # the first 20 runs all die holding a lock, however fast the machine
            argv.append(str(rng.randint(1, 12)))
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            out, err = proc.communicate(timeout=rng.uniform(0.4, 1.2))
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
            out, err = proc.communicate(timeout=30)
        assert proc.returncode in (0, -9), err.decode()[-2000:]
        kills += proc.returncode == -9
        if proc.returncode == 0:
            finished = out.decode()
            break
    assert finished == "done 200\n" and kills >= 10, (finished, kills)
    assert len(Store.open(store).log(limit=1000)) >= 200
    ops = (store / ".reel" / "logs" / "OPS").read_text()
    assert '"message":"break-lock lock:refs/' in ops and '"verb":"break-lock"' in ops
    left = sorted((store / ".reel" / "refs" / "views").glob("*.lock"))  # forks that died holding the lock
    done = Store.open(store)
    for lock in left:
        done.fork(lock.name[: -len(".lock")]).put("x", "1")  # the next writer of that ref breaks it
    assert not list((store / ".reel" / "refs").rglob("*.lock"))


def test_the_committed_index_is_a_cache_that_fsck_rebuilds(tmp_path: Path) -> None:
    store = Store.init(tmp_path)
    op = {"action": "write", "path": "x", "content": "1"}
    store.fork("a").effect("fs", op, key="t")
    store.commit("a")
    cache = tmp_path / ".reel" / "ops" / "committed"
    cache.write_text("C garbage\nH main 12\n")
    with pytest.raises(ViewTerminal):
        Store.open(tmp_path).fork("b").effect("fs", op, key="t")
    assert reel(tmp_path, "fsck").returncode == 0
    lines = cache.read_text().splitlines()
    assert lines[0] == f"C {task_op_id('main', 't')} main {ref(tmp_path, 'refs/heads/main')}"
    assert lines[-1] == f"H main {ref(tmp_path, 'refs/heads/main')}"


@pytest.mark.parametrize("n", ["999999999999999999999", "-1", "9223372036854775808"])
def test_an_out_of_range_log_count_is_e014_not_a_traceback(tmp_path: Path, n: str) -> None:
    assert reel(tmp_path, "init").returncode == 0
    out = reel(tmp_path, "log", "-n", n)
    assert out.returncode == 6 and out.stderr.startswith("error: E014: limit must be"), out.stderr
    assert "Traceback" not in out.stderr
    with pytest.raises(BadInput):
        Store.open(tmp_path).log(limit=-1)
    assert len(Store.open(tmp_path).log(limit=(1 << 63) - 1)) == 1


def test_a_task_key_through_asyncstore(tmp_path: Path) -> None:
    import asyncio

    from reelstore.aio import AsyncStore

    async def scenario() -> tuple[str, str]:
        store = AsyncStore.init(tmp_path)
        op = {"action": "write", "path": "x", "content": "1"}
        first = await store.fork("a")
        await first.effect("fs", op, key="t:1")
        done = await first.commit()
        again = await store.fork("b")
        with pytest.raises(ViewTerminal) as caught:
            await again.effect("fs", op, key="t:1")
        assert done.record is not None
        return str(caught.value.details["record"]), done.record.hex()

    refused_by, committed = asyncio.run(scenario())
    assert refused_by == committed


def test_a_local_write_refused_by_the_file_size_limit_is_e019(tmp_path: Path) -> None:
    """`reel get` into a file past RLIMIT_FSIZE: the machine's refusal (EFBIG), not store damage (E007)."""
    import resource

    store = Store.init(tmp_path)
    with store.view("a") as view:
        view.put("big", "x" * 100_000)
    env = {k: v for k, v in os.environ.items() if k != "REEL_DIR"}

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))

    with open(tmp_path / "out", "wb") as out:
        proc = subprocess.run(
            [REEL, "get", "main", "big"],
            cwd=tmp_path,
            env=env,
            stdout=out,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            preexec_fn=limit,
        )
    assert proc.returncode == 11 and proc.stderr.startswith("error: E019: cannot write"), proc.stderr
