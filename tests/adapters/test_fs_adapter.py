"""The fs adapter: Class C writes and deletes under its root, never outside it, written atomically."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from reelstore.adapters.fs import FsAdapter
from reelstore.backend.repo import Repo
from reelstore.errors import BadInput
from reelstore.kernel import inspection
from reelstore.kernel import verbs as kernel


def test_write_and_delete_fire_through_commit(tmp_path: Path, repo: Repo) -> None:
    (tmp_path / "gone.txt").write_text("old")
    kernel.fork(repo, "a")
    kernel.effect(repo, "a", "fs", {"action": "write", "path": "out/deep/a.txt", "content": "héllo", "mode": "0600"})
    kernel.effect(repo, "a", "fs", {"action": "delete", "path": "gone.txt"})
    assert (tmp_path / "gone.txt").exists() and not (tmp_path / "out").exists()
    res = kernel.commit(repo, "a")
    assert res.drain is not None and [o.state for o in res.drain.outcomes] == ["succeeded", "succeeded"]
    assert (tmp_path / "out/deep/a.txt").read_text() == "héllo"
    assert (tmp_path / "out/deep/a.txt").stat().st_mode & 0o777 == 0o600
    assert not (tmp_path / "gone.txt").exists()


def test_root_comes_from_config(tmp_path: Path, repo: Repo) -> None:
    repo.config.set("adapter.fs.root", "sandbox")
    repo.config.save()
    kernel.fork(repo, "a")
    made = kernel.effect(repo, "a", "fs", {"action": "write", "path": "f", "content": "x"})
    assert made.resource == "fs:f" and made.effect_class == "C" and made.delivery == "keyed"
    kernel.commit(repo, "a")
    assert (tmp_path / "sandbox" / "f").read_text() == "x"


@pytest.mark.parametrize("path", ["../escape", "a/../../escape", "/etc/passwd", "", ".", "a/\0b"])
def test_escaping_paths_are_refused_at_admission(repo: Repo, path: str) -> None:
    kernel.fork(repo, "a")
    with pytest.raises(BadInput):
        kernel.effect(repo, "a", "fs", {"action": "write", "path": path, "content": "x"})
    assert inspection.status(repo, "a").effects == ()


def test_symlink_leaving_the_root_is_refused(tmp_path: Path, repo: Repo) -> None:
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.mkdir()
    os.symlink(outside, tmp_path / "link")
    kernel.fork(repo, "a")
    with pytest.raises(BadInput):
        kernel.effect(repo, "a", "fs", {"action": "write", "path": "link/x", "content": "x"})
    kernel.effect(repo, "a", "fs", {"action": "write", "path": "later/x", "content": "x"})
    os.symlink(outside, tmp_path / "later")
    res = kernel.commit(repo, "a")
    assert res.drain is not None and res.drain.outcomes[0].state == "failed"
    assert list(outside.iterdir()) == []


def test_symlink_inside_the_root_is_not_followed_either(tmp_path: Path, repo: Repo) -> None:
    (tmp_path / "real").mkdir()
    os.symlink(tmp_path / "real", tmp_path / "alias")
    kernel.fork(repo, "a")
    with pytest.raises(BadInput, match="symbolic link"):
        kernel.effect(repo, "a", "fs", {"action": "write", "path": "alias/x", "content": "in"})
    kernel.effect(repo, "a", "fs", {"action": "write", "path": "real/x", "content": "in"})
    kernel.commit(repo, "a")
    assert (tmp_path / "real" / "x").read_text() == "in"


@pytest.mark.parametrize(
    "op",
    [
        {"action": "move", "path": "x"},
        {"action": "write", "path": "x"},
        {"action": "write", "path": "x", "content": 3},
        {"action": "write", "path": "x", "content": "c", "mode": "4755"},
        {"action": "delete", "path": "x", "content": "c"},
        {"action": "write", "path": "x", "content": "c", "extra": 1},
    ],
)
def test_malformed_ops_are_e014(repo: Repo, op: dict) -> None:
    with pytest.raises(BadInput):
        FsAdapter(repo).classify(op)


def test_reconcile_looks_at_the_file(tmp_path: Path, repo: Repo) -> None:
    kernel.fork(repo, "a")
    made = kernel.effect(repo, "a", "fs", {"action": "write", "path": "r.txt", "content": "want"})
    fs = FsAdapter(repo)
    assert fs.reconcile(made, "op") == "absent"
    (tmp_path / "r.txt").write_text("want")
    assert fs.reconcile(made, "op") == "succeeded"


def test_write_is_atomic_no_temp_files_left(tmp_path: Path, repo: Repo) -> None:
    kernel.fork(repo, "a")
    for i in range(3):
        kernel.effect(repo, "a", "fs", {"action": "write", "path": "out/f", "content": f"v{i}"})
    kernel.commit(repo, "a")
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["f"]
    assert (tmp_path / "out/f").read_text() == "v2"


# The store is out of reach (issue 11, finding 5)


@pytest.mark.parametrize(
    "path", [".reel/hooks/post-commit", ".reel/refs/heads/main", "./.reel/config", "x/.REEL/y", ".reel"]
)
def test_writes_into_the_store_are_refused_at_admission(tmp_path: Path, repo: Repo, path: str) -> None:
    kernel.fork(repo, "a")
    with pytest.raises(BadInput, match="store"):
        kernel.effect(repo, "a", "fs", {"action": "write", "path": path, "content": "#!/bin/sh\necho pwned\n"})
    with pytest.raises(BadInput, match="store"):
        kernel.effect(repo, "a", "fs", {"action": "delete", "path": path})
    assert inspection.status(repo, "a").effects == ()


def test_the_store_reached_under_another_name_is_refused_at_send(tmp_path: Path, repo: Repo) -> None:
    """A directory that becomes the store (renamed in after admission) is caught again at send."""
    (tmp_path / "d").mkdir()
    kernel.fork(repo, "a")
    kernel.effect(repo, "a", "fs", {"action": "write", "path": "d/refs/heads/main", "content": "0" * 64})
    trunk_before = repo.refs["refs/heads/main"]
    os.rmdir(tmp_path / "d")
    os.rename(tmp_path / ".reel", tmp_path / "d")
    os.symlink("d", tmp_path / ".reel")
    res = kernel.commit(Repo.open(tmp_path / "d"), "a")
    assert res.drain is not None and res.drain.outcomes[0].state == "failed"
    assert "store" in res.drain.outcomes[0].note
    assert Repo.open(tmp_path / "d").refs["refs/heads/main"] != trunk_before  # the commit moved it, by CAS
    assert (tmp_path / "d" / "refs" / "heads" / "main").read_text() != "0" * 64


def test_a_root_inside_the_store_refuses_everything(tmp_path: Path, repo: Repo) -> None:
    repo.config.set("adapter.fs.root", ".reel/hooks")
    repo.config.save()
    kernel.fork(repo, "a")
    with pytest.raises(BadInput, match="inside the store"):
        kernel.effect(repo, "a", "fs", {"action": "write", "path": "post-commit", "content": "x"})


def test_hook_written_through_cli_is_refused_and_never_runs(tmp_path: Path, reel) -> None:
    reel("init", check=True)
    hooks = {p.name: p.read_bytes() for p in (tmp_path / ".reel/hooks").iterdir()}
    reel("fork", "v", check=True)
    op = '{"action": "write", "path": ".reel/hooks/post-commit", "content": "#!/bin/sh\\ntouch pwned\\n"}'
    proc = reel("effect", "v", "--adapter", "fs", "--op", op)
    assert proc.returncode == 6 and b"E014" in proc.stderr and b"Traceback" not in proc.stderr
    reel("commit", "v", check=True)
    assert not (tmp_path / "pwned").exists()
    assert {p.name: p.read_bytes() for p in (tmp_path / ".reel/hooks").iterdir()} == hooks


# Doomed effects are refused, not fired into `unknown` (finding 9)


@pytest.mark.parametrize("path", ["x" * 300, "ok/" + "é" * 200 + "/f"])
def test_a_component_over_name_max_is_refused(repo: Repo, path: str) -> None:
    kernel.fork(repo, "a")
    with pytest.raises(BadInput, match="longer than"):
        kernel.effect(repo, "a", "fs", {"action": "write", "path": path, "content": "x"})


def test_a_path_that_is_a_directory_or_below_a_file_is_refused(tmp_path: Path, repo: Repo) -> None:
    (tmp_path / "dir").mkdir()
    (tmp_path / "file").write_text("f")
    kernel.fork(repo, "a")
    for path in ("dir", "dir/", "file/below"):
        for action in ("write", "delete"):
            op = (
                {"action": action, "path": path, "content": "x"}
                if action == "write"
                else {"action": action, "path": path}
            )
            with pytest.raises(BadInput):
                kernel.effect(repo, "a", "fs", op)
    assert inspection.status(repo, "a").effects == ()


def test_a_path_that_turns_doomed_after_admission_fails_and_does_not_block(tmp_path: Path, repo: Repo) -> None:
    kernel.fork(repo, "a")
    kernel.effect(repo, "a", "fs", {"action": "write", "path": "later", "content": "x"})
    kernel.effect(repo, "a", "fs", {"action": "write", "path": "after", "content": "y"})
    (tmp_path / "later").mkdir()
    res = kernel.commit(repo, "a")
    assert res.drain is not None
    assert [o.state for o in res.drain.outcomes] == ["failed", "succeeded"]
    assert (tmp_path / "after").read_text() == "y"


# The race (finding 4): a directory swapped for a link while 300 effects are written

_SWAPPER = r"""
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
libc.renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
AT_FDCWD, RENAME_EXCHANGE = -100, 2
a, b = sys.argv[1].encode(), sys.argv[2].encode()
deadline = time.monotonic() + float(sys.argv[3])
n = 0
print("ready", flush=True)
while time.monotonic() < deadline:
    if libc.renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE) != 0:
        sys.exit(f"renameat2 failed: {os.strerror(ctypes.get_errno())}")
    n += 1
print(n, flush=True)
"""


def test_a_swapping_process_never_lands_a_file_outside_the_root(tmp_path: Path) -> None:
    import subprocess
    import sys

    top = tmp_path / "top"
    outside = tmp_path / "outside"
    outside.mkdir()
    first = Repo.init(top)
    first.config.set("core.fsync", "false")  # the race is the point here, not durability
    first.config.save()
    repo = Repo.open(top / ".reel")
    (top / "d" / "sub").mkdir(parents=True)
    os.symlink(outside, top / "s")
    kernel.fork(repo, "a")
    count = 300
    for i in range(count):
        kernel.effect(repo, "a", "fs", {"action": "write", "path": f"d/sub/f{i}", "content": str(i)})
    swapper = subprocess.Popen(
        [sys.executable, "-c", _SWAPPER, str(top / "d"), str(top / "s"), "60"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert swapper.stdout is not None and swapper.stdout.readline().strip() == "ready"
        res = kernel.commit(repo, "a")
    finally:
        swapper.kill()
        out, _ = swapper.communicate(timeout=30)
    assert swapper.returncode == -9, f"the swapper stopped early: {out}"
    assert res.drain is not None
    states = [o.state for o in res.drain.outcomes]
    assert len(states) == count and set(states) <= {"succeeded", "failed"}
    assert "failed" in states and "succeeded" in states, "the swap never raced the drain"
    assert list(outside.rglob("*")) == [], "a file landed outside the root"
    real = top / ("d" if (top / "d").is_dir() and not (top / "d").is_symlink() else "s")
    landed = sorted(p.name for p in (real / "sub").iterdir())
    assert all(not name.startswith(".reel-tmp") for name in landed)
    assert len(landed) == states.count("succeeded")
