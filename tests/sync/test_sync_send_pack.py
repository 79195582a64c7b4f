"""Our own send-pack (`sync.send_pack`) against git's real receive-pack: the pack arrives whole however
the transport cuts the writes, the compare-and-swap holds, refusals come back in git's words, and a push
to a local repository never loads dulwich's client."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from dulwich.errors import HangupException
from gitserver import GIT_ENV, bare, fsck, git

from reelstore import sync
from reelstore.backend.repo import Repo
from reelstore.errors import Unreachable
from reelstore.objects import Blob
from reelstore.sync.outgoing import OutgoingPack
from reelstore.sync.send_pack import ZERO_SHA, GitService, error_file, send_pack
from reelstore.sync.transport import connect
from reelstore.sync.transport_base import on_path


class Trickle:
    """A receive-pack whose every write takes at most `most` bytes and says so, as a socket may."""

    def __init__(self, server: GitService, most: int) -> None:
        self.server, self.most, self.writes = server, most, 0

    def read(self, size: int) -> bytes:
        return self.server.read(size)

    def write(self, data: bytes) -> int:
        self.writes += 1
        self.server.write(data[: self.most])
        return min(len(data), self.most)


def _pack(n: int) -> tuple[OutgoingPack, list[Blob], str]:
    blobs = [Blob(b"object %d " % i * (i % 7 + 1)) for i in range(n)]
    out = OutgoingPack()
    for b in blobs:
        out.add_object(b.id, b.encode())
    return out, blobs, out.finish({"refs/heads/main": blobs[0].id}, [])


def test_a_pack_cut_into_short_writes_arrives_whole(tmp_path: Path) -> None:
    remote = bare(tmp_path / "r.git")
    out, blobs, commit = _pack(300)
    counted: list[int] = []
    with GitService("receive-pack", str(remote)) as server:
        wire = Trickle(server, 1000)
        fates = send_pack(wire, lambda refs: {b"refs/reel/heads/main": commit.encode()}, out, written=counted.append)
    assert fates == {b"refs/reel/heads/main": None}
    assert wire.writes >= 20 and sum(counted) == len(out)
    fsck(remote)
    assert git("--git-dir", str(remote), "rev-parse", "refs/reel/heads/main").strip() == commit
    hexid = blobs[5].id.hex()
    name = f"{commit}:objects/{hexid[:2]}/{hexid[2:]}"
    shown = subprocess.run(
        ["git", "--git-dir", str(remote), "cat-file", "blob", name],
        capture_output=True,
        check=True,
        env=GIT_ENV,
        timeout=60,
    ).stdout
    assert shown == blobs[5].encode()


def test_the_server_compares_and_swaps_each_ref(tmp_path: Path) -> None:
    remote = bare(tmp_path / "r.git")
    out, _, first = _pack(3)
    with GitService("receive-pack", str(remote)) as server:
        assert send_pack(server, lambda refs: {b"refs/reel/heads/main": first.encode()}, out) == {
            b"refs/reel/heads/main": None
        }
    tree = git("--git-dir", str(remote), "rev-parse", f"{first}^{{tree}}").strip()
    other = git("--git-dir", str(remote), "commit-tree", tree, "-m", "another store", cwd=tmp_path).strip()
    late, _, second = _pack(4)

    def moved_meanwhile(refs: dict[bytes, bytes]) -> dict[bytes, bytes]:
        assert refs == {b"refs/reel/heads/main": first.encode()}
        git("--git-dir", str(remote), "update-ref", "refs/reel/heads/main", other)  # after the advertisement
        return {b"refs/reel/heads/main": second.encode()}

    with GitService("receive-pack", str(remote)) as server:
        fates = send_pack(server, moved_meanwhile, late)
    assert fates[b"refs/reel/heads/main"]  # refused, with git's reason
    assert git("--git-dir", str(remote), "rev-parse", "refs/reel/heads/main").strip() == other
    with GitService("receive-pack", str(remote)) as server:
        assert send_pack(server, lambda refs: {b"refs/reel/heads/main": ZERO_SHA}, None) == {
            b"refs/reel/heads/main": None
        }
    assert git("--git-dir", str(remote), "for-each-ref").strip() == ""


def test_nothing_to_change_sends_no_pack(tmp_path: Path) -> None:
    remote = bare(tmp_path / "r.git")
    out, _, commit = _pack(3)
    with GitService("receive-pack", str(remote)) as server:
        send_pack(server, lambda refs: {b"refs/reel/heads/main": commit.encode()}, out)
    before = git("--git-dir", str(remote), "count-objects", "-v")
    with GitService("receive-pack", str(remote)) as server:
        assert send_pack(server, lambda refs: dict(refs), out) == {}
    assert git("--git-dir", str(remote), "count-objects", "-v") == before


def test_a_directory_that_is_not_a_repository_is_named_in_gits_words(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    with GitService("receive-pack", str(plain)) as server:
        with pytest.raises(HangupException):
            send_pack(server, lambda refs: {}, None)
        said = str(server.hung_up())
    assert "not a git repository" in said or "does not appear to be a git repository" in said
    repo = Repo.init(tmp_path / "a")
    sync.add_remote(repo, "plain", str(plain))
    with pytest.raises(Unreachable, match="git repository"):
        sync.push(repo, "plain")


def test_a_push_to_a_local_repository_in_a_fresh_process_sends_its_objects(tmp_path: Path) -> None:
    remote = bare(tmp_path / "r.git")
    repo = Repo.init(tmp_path / "a")
    sync.add_remote(repo, "origin", str(remote))
    script = (
        "import sys; from reelstore import sync; from reelstore.backend.repo import Repo; "
        "print(sync.push(Repo.open(sys.argv[1]), 'origin').objects)"
    )
    shown = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "a")], capture_output=True, text=True, check=True, timeout=120
    ).stdout.split()
    assert int(shown[0]) > 0
    fsck(remote)


def test_a_clone_and_fetch_of_a_local_repository_talk_to_git_itself(tmp_path: Path) -> None:
    remote = bare(tmp_path / "r.git")
    repo = Repo.init(tmp_path / "a")
    sync.add_remote(repo, "origin", str(remote))
    sync.push(repo, "origin")
    assert connect("origin", str(remote)).local  # git's own upload-pack and receive-pack, not dulwich's client
    script = (
        "import sys; from reelstore import sync; "
        "b, got = sync.clone(sys.argv[1], sys.argv[2]); f = sync.fetch(b, 'origin'); "
        "print(sorted(got.refs) == sorted(f.refs), len(got.refs))"
    )
    shown = subprocess.run(
        [sys.executable, "-c", script, str(remote), str(tmp_path / "b")],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout.split()
    assert shown == ["True", "1"]
    assert Repo.open(tmp_path / "b").refs["refs/heads/main"] == repo.refs["refs/heads/main"]


def _no_memfd(name: str) -> int:
    raise OSError(38, "memfd_create is not implemented here")


@pytest.mark.parametrize(
    "memfd", [getattr(os, "memfd_create", None), None, _no_memfd], ids=["memfd", "no-memfd", "memfd-fails"]
)
def test_a_childs_error_output_is_kept_in_an_anonymous_file(tmp_path: Path, memfd: Callable[[str], int] | None) -> None:
    """In a memfd where the system has one, else (none, or it fails) in a temporary file; either way a
    child writes to it and it reads back from the start, and nothing is left in the directory."""
    assert sys.platform != "linux" or hasattr(os, "memfd_create")  # so on Linux the memfd path is the one run
    before = sorted(os.listdir(tmp_path))
    errors = error_file(memfd)
    try:
        subprocess.run(
            ["git", "receive-pack", str(tmp_path / "missing")],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=errors,
            timeout=60,
            check=False,
        )
        errors.seek(0)
        said = errors.read()
    finally:
        errors.close()
    assert b"missing" in said
    assert sorted(os.listdir(tmp_path)) == before


def test_on_path_answers_as_shutil_which(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("git", "sh", "no-such-program-here"):
        assert on_path(name) == (shutil.which(name) is not None)
    (tmp_path / "tool").write_bytes(b"#!/bin/sh\n")
    (tmp_path / "tool").chmod(0o755)
    (tmp_path / "plain").write_bytes(b"data")
    (tmp_path / "plain").chmod(0o644)
    (tmp_path / "dir").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path))
    for name in ("tool", "plain", "dir", "git"):
        assert on_path(name) == (shutil.which(name) is not None), name
    assert on_path("tool") and not on_path("plain") and not on_path("dir")
