"""Sync through real git servers on 127.0.0.1: `git daemon` and smart HTTP (`git http-backend`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from gitserver import GitDaemon, GitHttp, bare, fsck, git
from test_sync import add_view, closure, grow, reread_all

from reelstore import sync
from reelstore.backend.repo import Repo
from reelstore.errors import RemoteConflict, StorageError, Unreachable
from reelstore.maintenance.fsck import fsck as reel_fsck
from reelstore.objects import Blob


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GitDaemon]:
    server = GitDaemon(tmp_path_factory.mktemp("served")).start()
    try:
        yield server
    finally:
        server.stop()


def served(daemon: GitDaemon, name: str) -> tuple[Path, str]:
    return bare(daemon.base / name), daemon.url(name)


def test_two_stores_sync_through_git_daemon(tmp_path: Path, daemon: GitDaemon) -> None:
    path, url = served(daemon, "two.git")
    a = Repo.init(tmp_path / "a")
    sync.add_remote(a, "origin", url)
    # similar payloads, so git's upload-pack sends deltas the receiver must resolve
    blobs = [Blob(b"shared prefix " * 40 + str(i).encode()) for i in range(60)]
    a.objects.put_many(blobs)
    grow(a, 25, "first")
    add_view(a, "agent")
    assert sync.push(a, "origin").objects > 25
    fsck(path)

    b, _ = sync.clone(url, tmp_path / "b")
    for name in ("refs/heads/main", "refs/views/agent"):
        assert b.refs[name] == a.refs[name]
        assert closure(b, b.refs[name]) == closure(a, a.refs[name])
    reread_all(b)
    assert reel_fsck(a).clean and reel_fsck(b).clean

    rec = grow(a, 3, "second")
    assert sync.push(a, "origin").objects == 3 + 2
    assert sync.fetch(b, "origin").objects == 3 + 2
    assert b.refs["refs/remotes/origin/heads/main"] == rec
    fsck(path)

    grow(b, 2, "from-b")
    with pytest.raises(RemoteConflict):
        sync.advance_remote_trunk(b, "origin", "main", b.refs["refs/heads/main"], b.refs["refs/heads/main"])
    fsck(path)


def test_git_daemon_remote_cas_and_tamper(tmp_path: Path, daemon: GitDaemon) -> None:
    path, url = served(daemon, "cas.git")
    a = Repo.init(tmp_path / "a")
    sync.add_remote(a, "origin", url)
    base = grow(a, 2, "base")
    sync.push(a, "origin")
    b, _ = sync.clone(url, tmp_path / "b")
    won = grow(a, 1, "a")
    pushed = sync.advance_remote_trunk(a, "origin", "main", base, won)
    lost = grow(b, 1, "b")
    with pytest.raises(RemoteConflict):
        sync.advance_remote_trunk(b, "origin", "main", base, lost)
    g = ("--git-dir", str(path))
    assert git(*g, "rev-parse", "refs/reel/heads/main").strip() == pushed.commit

    # replace the bytes of the remote's newest object, under its own name: the fetch is refused whole
    head = pushed.commit
    shard, rest = won.hex()[:2], won.hex()[2:]
    evil = git(*g, "hash-object", "-w", "--stdin", input=Blob(b"forged").encode()).strip()
    listing = git(*g, "ls-tree", f"{head}:objects/{shard}").splitlines()
    forged_shard = git(
        *g,
        "mktree",
        input="".join(
            f"100644 blob {evil}\t{rest}\n" if line.endswith(rest) else line + "\n" for line in listing
        ).encode(),
    )
    objects = git(*g, "ls-tree", f"{head}:objects").splitlines()
    forged_objects = git(
        *g,
        "mktree",
        input="".join(
            f"040000 tree {forged_shard.strip()}\t{shard}\n" if line.endswith(f"\t{shard}") else line + "\n"
            for line in objects
        ).encode(),
    ).strip()
    refs_blob = git(*g, "rev-parse", f"{head}:refs").strip()
    root = git(*g, "mktree", input=f"040000 tree {forged_objects}\tobjects\n100644 blob {refs_blob}\trefs\n".encode())
    forged = git(*g, "commit-tree", root.strip(), "-p", f"{head}^", "-m", "forged").strip()
    git(*g, "update-ref", "refs/reel/heads/main", forged, head)
    before = sorted(b.objects)
    with pytest.raises(StorageError, match="does not hash to its name"):
        sync.fetch(b, "origin")
    assert sorted(b.objects) == before
    assert b.refs["refs/remotes/origin/heads/main"] == base


def test_unreachable_remote_is_e010(tmp_path: Path, daemon: GitDaemon) -> None:
    a = Repo.init(tmp_path / "a")
    sync.add_remote(a, "gone", daemon.url("no-such.git"))
    grow(a, 1, "x")
    with pytest.raises(Unreachable):
        sync.push(a, "gone")
    with pytest.raises(Unreachable):
        sync.fetch(a, "gone")


def test_smart_http_remote(tmp_path: Path) -> None:
    base = tmp_path / "http"
    base.mkdir()
    path = bare(base / "web.git")
    git("--git-dir", str(path), "config", "http.receivepack", "true")
    with GitHttp(base) as server:
        a = Repo.init(tmp_path / "a")
        sync.add_remote(a, "origin", server.url("web.git"))
        grow(a, 12, "web")
        add_view(a, "agent")
        assert sync.push(a, "origin").objects > 12
        fsck(path)
        b, _ = sync.clone(server.url("web.git"), tmp_path / "b")
        assert b.refs["refs/views/agent"] == a.refs["refs/views/agent"]
        rec = grow(a, 2, "more")
        sync.push(a, "origin")
        assert sync.fetch(b, "origin").objects == 2 + 2
        assert b.refs["refs/remotes/origin/heads/main"] == rec
        assert reel_fsck(b).clean


def test_truncated_http_transfer_is_refused(tmp_path: Path) -> None:
    base = tmp_path / "http"
    base.mkdir()
    git("--git-dir", str(bare(base / "cut.git")), "config", "http.receivepack", "true")
    with GitHttp(base) as server:
        a = Repo.init(tmp_path / "a")
        sync.add_remote(a, "origin", server.url("cut.git"))
        grow(a, 200, "cut")
        sync.push(a, "origin")
        b = Repo.init(tmp_path / "b")
        sync.add_remote(b, "origin", server.url("cut.git"))
        before = sorted(b.objects)
        server.truncate = True
        with pytest.raises((StorageError, Unreachable)):
            sync.fetch(b, "origin")
        assert sorted(b.objects) == before and b.refs.list("refs/remotes/") == []
        server.truncate = False
        assert sync.fetch(b, "origin").objects == len(closure(a, a.refs["refs/heads/main"]))
