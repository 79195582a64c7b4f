"""The Postgres backend as a shared store: two directories on one database share one trunk, race on one
compare-and-swap with one winner, and a commit moves the trunk, deletes the view and owes its effects in
one SQL transaction, so a process killed anywhere inside it leaves all of that or none of it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import kernel_helpers as kh
import psycopg
import pytest
from conftest import REEL
from pg_server import PgServer

from reelstore.backend.refdb.ref_transaction import Owed
from reelstore.backend.repo import Repo
from reelstore.errors import Conflict
from reelstore.kernel import verbs as kernel
from reelstore.objects import Blob, Hash, Record

FS_WRITE = json.dumps({"action": "write", "path": "out.txt", "content": "x\n"})


@pytest.fixture(autouse=True)
def _clean() -> None:
    kh.reset()


def _reel(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    full = {k: v for k, v in os.environ.items() if k != "REEL_DIR"} | (env or {})
    return subprocess.run([REEL, *args], cwd=cwd, capture_output=True, env=full, timeout=120)


def _outbox(url: str) -> list[tuple[str, str, int, str, str]]:
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT op_id, trunk, position, tier, state FROM outbox ORDER BY trunk, seq").fetchall()
    return [(str(a), str(b), int(c), str(d), str(e)) for a, b, c, d, e in rows]


def test_two_directories_share_one_trunk_and_a_second_init_joins_it(tmp_path: Path, pg_url: str) -> None:
    a = Repo.init(tmp_path / "a", backend=pg_url)
    root = a.refs["refs/heads/main"]
    b = Repo.init(tmp_path / "b", backend=pg_url)
    assert b.refs["refs/heads/main"] == root  # joined, not restarted
    assert (tmp_path / "b" / ".reel" / "hooks").is_dir() and not (tmp_path / "b" / ".reel" / "objects").exists()
    kernel.fork(a, "v")
    kernel.put(a, "v", "f", b"from a")
    kernel.commit(a, "v")
    kernel.fork(b, "w")
    assert kernel.get(b, "w", "f") == b"from a"
    assert [o.verb for o in b.ops.operations()] == ["init", "fork", "put", "commit", "fork"]
    assert Repo.open(tmp_path / "b").config.get("core.backend") == pg_url


def test_two_handles_race_one_compare_and_swap_and_exactly_one_wins(tmp_path: Path, pg_url: str) -> None:
    handles = [Repo.init(tmp_path / "a", backend=pg_url), Repo.init(tmp_path / "b", backend=pg_url)]
    ref, rounds = "refs/heads/race", 20
    handles[0].refs.set(ref, Blob(b"start").id, None)
    gate = threading.Barrier(2)
    won: list[list[int]] = [[], []]
    lost: list[list[int]] = [[], []]

    def racer(i: int) -> None:
        repo = handles[i]
        for n in range(rounds):
            gate.wait(timeout=30)
            seen = repo.refs[ref]
            gate.wait(timeout=30)
            try:
                repo.refs.set(ref, Blob(f"{n}-{i}".encode()).id, seen, message=f"round {n}")
                won[i].append(n)
            except Conflict:
                lost[i].append(n)

    threads = [threading.Thread(target=racer, args=(i,)) for i in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert sorted(won[0] + won[1]) == list(range(rounds)) and sorted(lost[0] + lost[1]) == list(range(rounds))
    log = handles[1].refs.reflog(ref)
    assert len(log) == 1 + rounds  # one line per winner, none for a loser
    last = won[0][-1] if won[0] and (not won[1] or won[0][-1] > won[1][-1]) else won[1][-1]
    winner = 0 if last in won[0] else 1
    assert handles[0].refs[ref] == Blob(f"{last}-{winner}".encode()).id == log[-1].new


def test_concurrent_commits_from_two_directories_lose_nothing(tmp_path: Path, pg_url: str) -> None:
    handles = [Repo.init(tmp_path / "a", backend=pg_url), Repo.init(tmp_path / "b", backend=pg_url)]
    for h in handles:
        h.config.set("drain.onCommit", "workers")  # the commits leave their effects to drain workers
    per = 4
    errors: list[BaseException] = []

    def committer(i: int) -> None:
        try:
            for n in range(per):
                name = f"v{i}-{n}"
                kernel.fork(handles[i], name)
                kernel.put(handles[i], name, f"{i}/{n}", b"x")
                kernel.effect(handles[i], name, "recorder", {"n": i * 100 + n})
                kernel.commit(handles[i], name)
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=committer, args=(i,)) for i in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert errors == []
    repo = handles[0]
    chain, at = [], repo.refs["refs/heads/main"]
    while at is not None:
        rec = repo.objects.get_as(at, Record)
        chain.append(rec)
        at = rec.parent
    assert len(chain) == 1 + 2 * per  # every commit is a record on the trunk
    assert repo.refs.list("refs/views/") == []
    rows = _outbox(pg_url)
    assert len(rows) == 2 * per and len({r[0] for r in rows}) == 2 * per
    assert {(r[1], r[2], r[3], r[4]) for r in rows} == {("main", 0, "keyed", "owed")}
    assert kh.FIRED == []  # nothing sent by the committers: the outbox owes it


@pytest.mark.parametrize(
    ("point", "landed"),
    [
        ("refs:prepared", False),
        ("pg:refs-written", False),
        ("pg:outbox-written", False),
        ("pg:committing", False),
        ("commit:advanced", True),
    ],
)
def test_a_commit_killed_inside_its_transaction_is_all_or_nothing(
    tmp_path: Path, pg_url: str, point: str, landed: bool
) -> None:
    repo = Repo.init(tmp_path, backend=pg_url)
    kernel.fork(repo, "v")
    kernel.put(repo, "v", "x", b"state")
    for n in (1, 2):
        op = json.dumps({"action": "write", "path": f"out{n}.txt", "content": "x\n"})
        assert _reel(tmp_path, "effect", "v", "--adapter", "fs", "--op", op).returncode == 0
    head = repo.refs["refs/heads/main"]
    killed = _reel(tmp_path, "commit", "v", env={"REEL_TEST_CRASH_AT": point})
    assert killed.returncode == -signal.SIGKILL, killed.stderr.decode()
    fresh = Repo.open(tmp_path)
    moved = fresh.refs["refs/heads/main"] != head
    view_gone = fresh.refs.get("refs/views/v") is None
    rows = _outbox(pg_url)
    assert (moved, view_gone, len(rows)) == ((True, True, 2) if landed else (False, False, 0))
    if not landed:  # the killed connection's locks went with it: the commit goes through now, whole
        kernel.commit(fresh, "v")
        assert fresh.refs.get("refs/views/v") is None and len(_outbox(pg_url)) == 2
    top = fresh.objects.get_as(fresh.refs["refs/heads/main"], Record)
    assert [r[2] for r in _outbox(pg_url)] == [0, 1] and top.effects is not None


def test_reel_init_backend_on_the_command_line(tmp_path: Path, pg_url: str) -> None:
    made = _reel(tmp_path, "--json", "init", "--backend", pg_url, "a")
    assert made.returncode == 0, made.stderr.decode()
    assert json.loads(made.stdout) == {"path": str(tmp_path / "a" / ".reel"), "trunk": "main", "backend": pg_url}
    joined = _reel(tmp_path, "init", "--backend", pg_url, "b")
    assert joined.returncode == 0 and pg_url in joined.stdout.decode()
    for args in (("fork", "v"), ("put", "v", "f", "-"), ("commit", "v")):
        done = subprocess.run([REEL, *args], cwd=tmp_path / "a", input=b"hi", capture_output=True, timeout=120)
        assert done.returncode == 0, done.stderr.decode()
    seen = _reel(tmp_path / "b", "--json", "op", "log")
    assert seen.returncode == 0, seen.stderr.decode()
    assert "commit" in [op["verb"] for op in json.loads(seen.stdout)["operations"]]
    assert "backend = " + pg_url in (tmp_path / "b" / ".reel" / "config").read_text()


def test_a_bad_backend_is_a_clear_error_naming_the_option_and_creates_nothing(
    tmp_path: Path, pg_server: PgServer, reserve_port
) -> None:
    unreachable = f"postgresql://{pg_server.user}@127.0.0.1:{reserve_port()}/db"
    cases = [
        ("mysql://h/db", 6, "E014"),
        (f"postgresql://u:secret@127.0.0.1:{pg_server.port}/db", 6, "E014"),
        (f"postgresql://u@127.0.0.1:{pg_server.port}/db?password=secret", 6, "E014"),
        ("postgresql://127.0.0.1:notaport/db", 6, "E014"),
        (unreachable, 4, "E010"),
    ]
    for url, status, code in cases:
        out = _reel(tmp_path, "init", "--backend", url, "d")
        err = out.stderr.decode()
        assert out.returncode == status, (url, err)
        assert code in err and "--backend" in err and "Traceback" not in err, err
        assert "secret" not in err
        assert not (tmp_path / "d" / ".reel").exists()


@pytest.mark.parametrize("mode", ["fast", "immediate"])
def test_a_server_restart_loses_nothing_committed_and_the_handle_reconnects(
    tmp_path: Path, pg_server: PgServer, pg_url: str, mode: str
) -> None:
    repo = Repo.init(tmp_path, backend=pg_url)
    repo.config.set("drain.onCommit", "workers")  # the commit leaves its effect owed in the outbox
    kernel.fork(repo, "v")
    kernel.put(repo, "v", "a", b"1")
    kernel.effect(repo, "v", "recorder", {"n": 1})
    record = kernel.commit(repo, "v").record
    pg_server.restart(mode)
    assert repo.refs["refs/heads/main"] == record  # the same handle: its dropped connection is opened again
    kernel.fork(repo, "w")  # a ref transaction first on a fresh connection
    pg_server.restart(mode)
    kernel.put(repo, "w", "b", b"2")  # objects first, then the ref transaction
    pg_server.restart(mode)
    kernel.commit(repo, "w")
    fresh = Repo.open(tmp_path)
    kernel.fork(fresh, "x")
    assert kernel.get(fresh, "x", "a") == b"1" and kernel.get(fresh, "x", "b") == b"2"
    assert [r[4] for r in _outbox(pg_url)] == ["owed"]


def _owed(op: str, record: Hash) -> Owed:
    return Owed(op, "main", record, 0, Blob(b"effect").id, "keyed")


def test_an_operation_already_owed_refuses_the_whole_transaction(tmp_path: Path, pg_url: str) -> None:
    repo = Repo.init(tmp_path, backend=pg_url)
    a, b = Blob(b"a").id, Blob(b"b").id
    repo.refs.transaction("first").create("refs/heads/x", a).owe([_owed("op_same", a)]).commit()
    tx = repo.refs.transaction("second").update("refs/heads/x", b, a).create("refs/heads/y", b)
    with pytest.raises(Conflict, match="already in the outbox"):
        tx.owe([_owed("op_other", b), _owed("op_same", b)]).commit()
    assert repo.refs["refs/heads/x"] == a and repo.refs.get("refs/heads/y") is None
    assert [r[0] for r in _outbox(pg_url)] == ["op_same"]
    assert [e.message for e in repo.refs.reflog("refs/heads/x")] == ["first"]
    assert "second" not in [op.message for op in repo.ops.operations()]


def test_disk_and_memory_stores_ignore_what_a_transaction_owes(tmp_path: Path) -> None:
    for repo in (Repo.memory(), Repo.init(tmp_path)):
        a = Blob(b"a").id
        repo.refs.transaction("t").create("refs/heads/x", a).owe([_owed("op_1", a)]).commit()
        assert repo.refs["refs/heads/x"] == a


def test_a_writer_of_a_locked_ref_waits_for_the_holder_then_compares(tmp_path: Path, pg_url: str) -> None:
    a, b = Repo.init(tmp_path / "a", backend=pg_url), Repo.init(tmp_path / "b", backend=pg_url)
    x, y, z = Blob(b"x").id, Blob(b"y").id, Blob(b"z").id
    a.refs.set("refs/heads/r", x, None)
    held = a.refs.transaction("holder").update("refs/heads/r", y, x)
    held.prepare()
    result: list[BaseException | None] = []

    def writer() -> None:
        try:
            b.refs.set("refs/heads/r", z, x)
            result.append(None)
        except BaseException as exc:  # inspected below
            result.append(exc)

    t = threading.Thread(target=writer)
    t.start()
    t.join(timeout=1.0)
    assert t.is_alive() and result == []  # queued behind the holder's row lock, not failed
    held.commit()
    t.join(timeout=30)
    assert len(result) == 1 and isinstance(result[0], Conflict)  # it then saw y, not the x it expected
    assert b.refs["refs/heads/r"] == y


def test_a_ref_held_past_the_lock_timeout_is_e002(tmp_path: Path, pg_url: str) -> None:
    from reelstore.backend.postgres_refs import PgRefStore

    a, b = Repo.init(tmp_path / "a", backend=pg_url), Repo.init(tmp_path / "b", backend=pg_url)
    assert isinstance(b.refs, PgRefStore)
    b.refs.db.run(lambda conn: conn.execute("SET lock_timeout = '300ms'"))  # this session's, not the 10 s default
    x = Blob(b"x").id
    a.refs.set("refs/heads/r", x, None)
    held = a.refs.transaction("holder").update("refs/heads/r", Blob(b"y").id, x)
    held.prepare()
    try:
        with pytest.raises(Conflict, match="held them too long"):
            b.refs.set("refs/heads/r", Blob(b"z").id, x)
    finally:
        held.abort()
    assert b.refs["refs/heads/r"] == x
    b.refs.set("refs/heads/r", Blob(b"z").id, x)  # nothing left locked


def test_the_python_apis_make_and_join_a_shared_store(tmp_path: Path, pg_url: str) -> None:
    from reelstore.aio import AsyncStore
    from reelstore.api import Store
    from reelstore.errors import BadInput

    first = Store.init(tmp_path / "a", backend=pg_url)
    second = AsyncStore.init(tmp_path / "b", backend=pg_url)
    second.close()
    assert first.repo.refs["refs/heads/main"] == Store.open(tmp_path / "b").repo.refs["refs/heads/main"]
    with pytest.raises(BadInput, match="^E014: backend: the URL holds a password"):
        Store.init(tmp_path / "c", backend="postgresql://u:pw@127.0.0.1/db")
    assert not (tmp_path / "c").exists()


def test_writing_an_old_object_again_makes_it_young_and_keeps_its_bytes(pg_url: str) -> None:
    from reelstore.backend.postgres import PgDb, PgObjectStore

    store = PgObjectStore(PgDb(pg_url))
    blob = Blob(b"kept")
    store.put(blob)
    with psycopg.connect(pg_url) as conn:
        conn.execute("UPDATE objects SET written = now() - interval '30 days'")
    assert store.mtime(blob.id) < time.time() - 29 * 86400
    store.put(blob)
    assert store.mtime(blob.id) > time.time() - 60 and store.get(blob.id) == blob


def test_committers_of_one_trunk_take_turns(tmp_path: Path, pg_url: str) -> None:
    """A commit waits for its turn on the trunk's queue (held here by another handle) instead of racing
    the holder, then lands; the queue is freed at the end of the holder's block."""
    a, b = Repo.init(tmp_path / "a", backend=pg_url), Repo.init(tmp_path / "b", backend=pg_url)
    kernel.fork(b, "v")
    kernel.put(b, "v", "f", b"x")
    done: list[BaseException | None] = []

    def commit() -> None:
        try:
            kernel.commit(b, "v")
            done.append(None)
        except BaseException as exc:  # inspected below
            done.append(exc)

    with a.refs.queue("refs/heads/main"):
        t = threading.Thread(target=commit)
        t.start()
        t.join(timeout=1.0)
        assert t.is_alive() and done == []
    t.join(timeout=30)
    assert done == [None] and b.refs.get("refs/views/v") is None
    with a.refs.queue("refs/heads/main"):  # free again
        pass


def test_threads_share_one_handle(tmp_path: Path, pg_url: str) -> None:
    repo = Repo.init(tmp_path, backend=pg_url)
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            for n in range(3):
                name = f"t{i}-{n}"
                kernel.fork(repo, name)
                kernel.put(repo, name, f"{i}/{n}", b"x")
                kernel.effect(repo, name, "recorder", {"n": i * 10 + n})
                kernel.commit(repo, name)
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert errors == [] and not any(t.is_alive() for t in threads)
    kernel.fork(repo, "all")
    assert sorted(name for name, _ in kernel.ls(repo, "all")) == sorted(f"{i}/{n}" for i in range(4) for n in range(3))
    assert len(_outbox(pg_url)) == 12


def test_a_commit_that_owes_effects_wakes_the_listeners_once_it_lands(tmp_path: Path, pg_url: str) -> None:
    repo = Repo.init(tmp_path, backend=pg_url)
    with psycopg.connect(pg_url, autocommit=True) as listener:
        listener.execute("LISTEN reel_outbox")
        kernel.fork(repo, "quiet")
        kernel.put(repo, "quiet", "f", b"x")
        kernel.commit(repo, "quiet")  # no effect owed: no wake-up
        kernel.fork(repo, "v")
        kernel.effect(repo, "v", "recorder", {"n": 1})
        kernel.commit(repo, "v")
        got = [(n.channel, n.payload) for n in listener.notifies(timeout=5, stop_after=1)]
        assert got == [("reel_outbox", "main")]
        assert list(listener.notifies(timeout=0.5)) == []


def test_without_the_client_a_shared_store_names_the_extra_to_install(tmp_path: Path, pg_url: str) -> None:
    Repo.init(tmp_path / "a", backend=pg_url)
    hide = "import sys; sys.modules['psycopg'] = None; from reelstore.cli.main import main; main()"
    out = subprocess.run(
        [sys.executable, "-c", hide, "-C", str(tmp_path / "a"), "status"], capture_output=True, timeout=120
    )
    err = out.stderr.decode()
    assert out.returncode == 6 and "E014" in err and "reelstore[postgres]" in err and "Traceback" not in err, err


def test_a_commit_whose_answer_is_lost_is_e007_saying_so_and_the_handle_goes_on(tmp_path: Path, pg_url: str) -> None:
    from reelstore.backend.postgres_refs import PgRefStore
    from reelstore.crashpoints import hooked
    from reelstore.errors import StorageError

    repo = Repo.init(tmp_path, backend=pg_url)
    assert isinstance(repo.refs, PgRefStore)
    pid = repo.refs.db.one("SELECT pg_backend_pid()")[0]

    def cut(point: str) -> None:
        if point == "pg:committing":  # the server drops this handle's session just before its COMMIT
            with psycopg.connect(pg_url, autocommit=True) as admin:
                admin.execute("SELECT pg_terminate_backend(%s)", (pid,))

    with hooked(cut), pytest.raises(StorageError, match="during commit \\(whether it took effect is unknown\\)"):
        repo.refs.set("refs/heads/x", Blob(b"x").id, None)
    assert repo.refs.get("refs/heads/x") is None  # here it had not: the session ended before its COMMIT
    repo.refs.set("refs/heads/x", Blob(b"x").id, None)
    assert repo.refs["refs/heads/x"] == Blob(b"x").id


def test_an_effect_aborted_on_one_machine_is_never_committed_from_another(tmp_path: Path, pg_url: str) -> None:
    from reelstore.errors import ViewTerminal

    a, b = Repo.init(tmp_path / "a", backend=pg_url), Repo.init(tmp_path / "b", backend=pg_url)
    kernel.fork(a, "v")
    kernel.effect(a, "v", "recorder", {"n": 1})
    old = a.refs["refs/views/v"]
    kernel.abort(a, "v")
    b.refs.set("refs/views/v", old, None)  # the aborted view brought back on another machine
    with pytest.raises(ViewTerminal, match="aborted"):
        kernel.commit(b, "v")
    assert _outbox(pg_url) == [] and not (tmp_path / "a" / ".reel" / "ops" / "aborted").exists()


def test_refs_are_listed_in_code_point_order_whatever_the_database_collation(pg_server: PgServer) -> None:
    from reelstore.backend.postgres import PgDb
    from reelstore.backend.postgres_refs import PgRefStore

    db = f"icu_{os.urandom(4).hex()}"
    with psycopg.connect(pg_server.url(), autocommit=True) as admin:  # a database that sorts `a` before `B`
        admin.execute(
            f"CREATE DATABASE {db} TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C.UTF-8'"
        )
    try:
        refs = PgRefStore(PgDb(pg_server.url(db)))
        names = ["refs/heads/a", "refs/heads/B", "refs/heads/a-b", "refs/heads/Z"]
        for n in names:
            refs.set(n, Blob(n.encode()).id, None)
        assert [n for n, _ in refs.list("refs/heads/")] == sorted(names) == list(refs.names())
        refs.db.close()
    finally:
        with psycopg.connect(pg_server.url(), autocommit=True) as admin:
            admin.execute(f"DROP DATABASE {db} WITH (FORCE)")


def test_a_thread_waiting_for_the_handle_leaves_the_open_transaction_alone(tmp_path: Path, pg_url: str) -> None:
    """Another thread of the same handle asks for a ref transaction while one is writing: it waits for
    the connection and touches none of the open transaction's state (its outbox rows, its outcome)."""
    from reelstore.crashpoints import hooked

    repo = Repo.init(tmp_path, backend=pg_url)
    x, y = Blob(b"x").id, Blob(b"y").id
    other: list[threading.Thread] = []

    def meanwhile(point: str) -> None:
        if point == "pg:refs-written" and not other:
            other.append(threading.Thread(target=repo.refs.set, args=("refs/heads/other", y, None)))
            other[0].start()
            other[0].join(timeout=0.5)  # it is waiting for the connection this thread holds

    with hooked(meanwhile):
        repo.refs.transaction("first").create("refs/heads/x", x).owe([_owed("op_1", x)]).commit()
    other[0].join(timeout=30)
    assert repo.refs["refs/heads/x"] == x and repo.refs["refs/heads/other"] == y
    assert [r[0] for r in _outbox(pg_url)] == ["op_1"]


def test_machines_initialising_one_database_at_once_share_one_trunk(tmp_path: Path, pg_url: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "REEL_DIR"}
    procs = [
        subprocess.Popen(
            [REEL, "init", "--backend", pg_url, f"m{i}"],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for i in range(4)
    ]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err.decode()
    heads = {Repo.open(tmp_path / f"m{i}").refs["refs/heads/main"] for i in range(4)}
    assert len(heads) == 1
    assert len(Repo.open(tmp_path / "m0").refs.reflog("refs/heads/main")) == 1  # started once


def test_gc_of_a_shared_store_spares_unreachable_objects_within_the_grace_period(tmp_path: Path, pg_url: str) -> None:
    from reelstore.maintenance.gc import gc

    repo = Repo.init(tmp_path, backend=pg_url)
    young, old = Blob(b"another machine's, not yet named"), Blob(b"long unreferenced")
    repo.objects.put_many([young, old])
    with psycopg.connect(pg_url) as conn:
        conn.execute("UPDATE objects SET written = now() - interval '30 days' WHERE id = %s", (bytes(old.id),))
    gc(repo)
    assert repo.objects.has(young.id) and not repo.objects.has(old.id)
    assert repo.objects.has(repo.refs["refs/heads/main"])


def test_a_store_whose_database_is_unreachable_is_e010_naming_core_backend(
    tmp_path: Path, pg_server: PgServer, pg_url: str, reserve_port
) -> None:
    Repo.init(tmp_path / "a", backend=pg_url)
    config = tmp_path / "a" / ".reel" / "config"
    config.write_text(config.read_text().replace(f":{pg_server.port}/", f":{reserve_port()}/"))
    out = _reel(tmp_path / "a", "status")
    err = out.stderr.decode()
    assert out.returncode == 4 and "E010" in err and "core.backend" in err and "Traceback" not in err, err


def test_a_commit_on_a_shared_store_is_one_oplog_row_with_its_mark(tmp_path: Path, pg_url: str) -> None:
    repo = Repo.init(tmp_path, backend=pg_url)
    kernel.fork(repo, "v")
    kernel.commit(repo, "v")
    with psycopg.connect(pg_url) as conn:
        last = bytes(conn.execute("SELECT line FROM oplog ORDER BY seq DESC LIMIT 1").fetchone()[0])
    docs = [json.loads(line) for line in last.splitlines()]
    assert [d["verb"] for d in docs] == ["commit", "commit"] and "refs" in docs[0] and docs[1]["view"] == "v"
    assert docs[0]["op"] == docs[1]["op"]
