"""Sync against real servers misbehaving as real servers do: a pruned ref, a server without atomic
pushes, ssh through the user's own ssh command, a relative clone path, and remote errors in words."""

from __future__ import annotations

import os
import stat
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import REEL
from gitserver import GitDaemon, GitHttp, bare, fsck, git
from test_sync import add_view, add_view_object, grow

from reelstore import sync
from reelstore.api import Store
from reelstore.backend.repo import Repo
from reelstore.errors import RemoteConflict, Unreachable
from reelstore.objects import Blob


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[GitDaemon]:
    base = tmp_path / "srv"
    base.mkdir()
    d = GitDaemon(base).start()
    try:
        yield d
    finally:
        d.stop()


def reel(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if k != "REEL_DIR"} | (env or {})
    return subprocess.run([REEL, *args], cwd=cwd, env=full, capture_output=True, text=True, timeout=120)


def test_a_ref_deleted_and_pruned_on_the_server_is_recovered_once(tmp_path: Path, daemon: GitDaemon) -> None:
    """The store believes the server holds what it pushed under a ref; the server deletes that ref and
    runs `git gc --prune=now`. The next push is refused for missing objects; the store forgets what it
    believed, pushes again in full, once, and says so."""
    remote = bare(daemon.base / "r.git")
    a = Repo.init(tmp_path / "a")
    sync.add_remote(a, "origin", daemon.url("r.git"))
    grow(a, 2, "base")
    sync.push(a, "origin", ["refs/heads/main"])
    data = Blob(b"only the doomed view reaches this")
    a.refs.set("refs/views/doomed", add_view_object(a, "doomed", [data]), None)
    sync.push(a, "origin", ["refs/views/doomed"])
    git("--git-dir", str(remote), "update-ref", "-d", "refs/reel/views/doomed")
    git("--git-dir", str(remote), "reflog", "expire", "--expire=now", "--all")
    git("--git-dir", str(remote), "gc", "--prune=now", "-q")

    shared = add_view_object(a, "again", [data])  # a new view over the pruned blob
    a.refs.set("refs/views/again", shared, None)
    result = sync.push(a, "origin", ["refs/views/again"])
    assert len(result.notes) == 1 and "pushed again in full" in result.notes[0], result.notes
    assert "missing necessary objects" in result.notes[0]
    fsck(remote)
    b, _ = sync.clone(daemon.url("r.git"), tmp_path / "b")
    assert b.refs["refs/views/again"] == shared
    grow(a, 1, "later")
    assert sync.push(a, "origin").notes == []  # recovered for good: the next push is ordinary


def test_without_atomic_pushes_the_trunk_moves_first_then_the_view_ref(tmp_path: Path) -> None:
    remote = bare(tmp_path / "r.git")
    git("--git-dir", str(remote), "config", "receive.advertiseAtomic", "false")
    a = Store.init(tmp_path / "a")
    sync.add_remote(a.repo, "origin", str(remote))
    a.fork("pay").put("f", b"x")
    sync.push(a.repo, "origin")
    fence = sync.remote_fence(a.repo, "origin")
    a.commit("pay", fence=fence)
    assert fence.result is not None and "does not offer atomic pushes" in fence.result.notes[0]
    refs = git("--git-dir", str(remote), "for-each-ref")
    assert "refs/reel/views/pay" not in refs and "refs/reel/heads/main" in refs


def test_a_view_ref_left_behind_reads_as_committed(tmp_path: Path) -> None:
    """If the second step of a non-atomic commit never happens, the remote still lists the view; a
    clone does not check it out, and a fetch retires a local copy as committed."""
    remote = bare(tmp_path / "r.git")
    a = Store.init(tmp_path / "a")
    sync.add_remote(a.repo, "origin", str(remote))
    a.fork("pay").put("f", b"x")
    sync.push(a.repo, "origin")
    b, _ = sync.clone(str(remote), tmp_path / "b")
    leftover = git("--git-dir", str(remote), "rev-parse", "refs/reel/views/pay").strip()
    a.commit("pay", fence=sync.remote_fence(a.repo, "origin"))
    git("--git-dir", str(remote), "update-ref", "refs/reel/views/pay", leftover)  # as if step two was lost
    record = a.repo.refs["refs/heads/main"]
    c, _ = sync.clone(str(remote), tmp_path / "c")
    assert c.refs.get("refs/views/pay") is None and c.refs["refs/heads/main"] == record
    fetched = sync.fetch(b, "origin")
    assert fetched.retired == {"pay": record} and b.refs.get("refs/views/pay") is None


def test_push_delete_and_fetch_prune(tmp_path: Path) -> None:
    remote = bare(tmp_path / "r.git")
    a = Repo.init(tmp_path / "a")
    sync.add_remote(a, "origin", str(remote))
    add_view(a, "scratch")
    sync.push(a, "origin")
    b, _ = sync.clone(str(remote), tmp_path / "b")
    out = reel(tmp_path / "a", "push", "--delete", "origin", "views/scratch")
    assert out.returncode == 0, out.stderr
    assert "deleted  refs/views/scratch" in out.stdout
    assert "refs/reel/views/scratch" not in git("--git-dir", str(remote), "for-each-ref")
    assert a.refs.get("refs/remotes/origin/views/scratch") is None
    again = reel(tmp_path / "a", "push", "--delete", "origin", "views/scratch")
    assert again.returncode == 4 and again.stderr.startswith("error: E001: ")
    kept = reel(tmp_path / "b", "fetch")
    assert "refs/views/scratch is gone from origin" in kept.stdout
    assert b.refs.get("refs/remotes/origin/views/scratch") is not None  # kept without --prune
    pruned = reel(tmp_path / "b", "fetch", "--prune")
    assert "pruned refs/remotes/origin/views/scratch" in pruned.stdout
    assert b.refs.get("refs/remotes/origin/views/scratch") is None


def _fake_ssh(tmp_path: Path, name: str) -> tuple[Path, Path]:
    """An ssh stand-in that runs the remote command here (real git upload-pack/receive-pack) and logs."""
    log = tmp_path / f"{name}.log"
    script = tmp_path / name
    script.write_text(f'#!/bin/sh\necho "$@" >> "{log}"\nfor last; do :; done\nexec sh -c "$last"\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script, log


@pytest.mark.parametrize("how", ["GIT_SSH_COMMAND", "GIT_SSH", "core.sshCommand"])
def test_ssh_remotes_use_the_users_ssh_command(tmp_path: Path, how: str) -> None:
    remote = bare(tmp_path / "r.git")
    script, log = _fake_ssh(tmp_path, "my-ssh")
    a = Repo.init(tmp_path / "a")
    grow(a, 2, "ssh")
    url = f"ssh://reel-test.invalid{remote}"
    env = (
        {"GIT_SSH_COMMAND": f"{script} -o BatchMode=yes"}
        if how == "GIT_SSH_COMMAND"
        else ({"GIT_SSH": str(script)} if how == "GIT_SSH" else {})
    )
    if how == "core.sshCommand":
        a.config.set("core.sshCommand", str(script))
    for args in (["remote", "add", "origin", url], ["push"], ["fetch"]):
        proc = reel(tmp_path / "a", *args, env=env)
        assert proc.returncode == 0, proc.stderr
    assert "reel-test.invalid" in log.read_text() and "git-receive-pack" in log.read_text()
    assert git("--git-dir", str(remote), "rev-parse", "refs/reel/heads/main").strip()


def test_clone_of_a_relative_path_stores_a_url_that_works_from_the_new_store(tmp_path: Path) -> None:
    bare(tmp_path / "srv" / "r.git")
    a = Repo.init(tmp_path / "a")
    sync.add_remote(a, "origin", str(tmp_path / "srv" / "r.git"))
    grow(a, 1, "x")
    sync.push(a, "origin")
    work = tmp_path / "work"
    work.mkdir()
    proc = reel(work, "clone", "../srv/r.git", "d2")
    assert proc.returncode == 0, proc.stderr
    stored = Repo.open(work / "d2").config.get("remote.origin.url")
    assert stored == str((tmp_path / "srv" / "r.git").resolve())
    fetched = reel(work / "d2", "fetch")
    assert fetched.returncode == 0, fetched.stderr


def test_remote_errors_are_words_and_cannot_talk_means_nothing_answered(
    tmp_path: Path, daemon: GitDaemon, reserve_port: Callable[[], int]
) -> None:
    a = Repo.init(tmp_path / "a")
    grow(a, 1, "x")
    cases = {
        "answered": daemon.url("no-such.git"),
        "silent": f"git://127.0.0.1:{reserve_port()}/x.git",
        "silent-http": f"http://127.0.0.1:{reserve_port()}/x.git",
    }
    for name, url in cases.items():
        sync.add_remote(a, name, url)
        for op in (sync.push, sync.fetch):
            with pytest.raises(Unreachable) as err:
                op(a, name)
            message = err.value.message
            assert "b'" not in message and 'b"' not in message, message
            assert ("cannot talk to" in message) == name.startswith("silent"), message
    with GitHttp(tmp_path / "srv") as server:
        sync.add_remote(a, "web", server.url("missing.git"))
        with pytest.raises(Unreachable) as err:
            sync.fetch(a, "web")
        assert "cannot talk to" not in err.value.message and "b'" not in err.value.message


def test_a_refused_update_is_quoted_in_words(tmp_path: Path) -> None:
    remote = bare(tmp_path / "r.git")
    hook = remote / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'policy: no pushes today' >&2\nexit 1\n")
    hook.chmod(0o755)
    a = Repo.init(tmp_path / "a")
    sync.add_remote(a, "origin", str(remote))
    grow(a, 1, "x")
    with pytest.raises(RemoteConflict) as err:
        sync.push(a, "origin")
    assert "b'" not in err.value.message and "refused" in err.value.message


def test_commit_remote_over_smart_http_removes_the_view_ref_in_the_same_push(tmp_path: Path) -> None:
    base = tmp_path / "http"
    base.mkdir()
    path = bare(base / "web.git")
    git("--git-dir", str(path), "config", "http.receivepack", "true")
    with GitHttp(base) as server:
        a = Store.init(tmp_path / "a")
        sync.add_remote(a.repo, "origin", server.url("web.git"))
        a.fork("pay").put("f", b"x")
        sync.push(a.repo, "origin")
        b, _ = sync.clone(server.url("web.git"), tmp_path / "b")
        fence = sync.remote_fence(a.repo, "origin")
        record = a.commit("pay", fence=fence).record
        assert fence.result is not None and fence.result.notes == []  # one atomic push
        assert "refs/reel/views/pay" not in git("--git-dir", str(path), "for-each-ref")
        fsck(path)
        fetched = sync.fetch(b, "origin")
        assert record is not None and fetched.retired == {"pay": record}
