"""Hooks run like git's: only when executable, context in the environment, a refusing pre-hook is E009."""

from __future__ import annotations

from pathlib import Path

import pytest

from reelstore.backend.repo import Repo
from reelstore.errors import CapabilityViolation
from reelstore.kernel import verbs as kernel


def install(repo: Repo, name: str, body: str, executable: bool = True) -> Path:
    path = repo.path / "hooks" / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755 if executable else 0o644)
    return path


def test_samples_are_installed_and_do_nothing(repo: Repo) -> None:
    for name in ("pre-commit", "pre-drain", "post-commit", "post-abort", "notify"):
        assert (repo.path / "hooks" / name).is_file()
    kernel.fork(repo, "a")
    kernel.commit(repo, "a")


def test_refusing_pre_commit_is_e009_and_changes_nothing(repo: Repo) -> None:
    install(repo, "pre-commit", 'echo "no commits of $REEL_VIEW into $REEL_TARGET ($REEL_EFFECTS)" >&2; exit 3\n')
    kernel.fork(repo, "a")
    kernel.effect(repo, "a", "fs", {"action": "write", "path": "x", "content": "x"})
    head, view = repo.refs["refs/heads/main"], repo.refs["refs/views/a"]
    with pytest.raises(CapabilityViolation) as err:
        kernel.commit(repo, "a")
    assert "no commits of a into refs/heads/main (1)" in err.value.message and "exit 3" in err.value.message
    assert repo.refs["refs/heads/main"] == head and repo.refs["refs/views/a"] == view
    assert not (repo.path.parent / "x").exists()


def test_non_executable_hook_does_not_run(repo: Repo) -> None:
    install(repo, "pre-commit", "exit 1\n", executable=False)
    kernel.fork(repo, "a")
    kernel.commit(repo, "a")


def test_post_hooks_see_context_and_their_status_is_ignored(repo: Repo) -> None:
    log = repo.path.parent / "hook.log"
    install(repo, "post-commit", f'echo "commit $REEL_VIEW $REEL_RECORD $REEL_HOOK" >> {log}; exit 1\n')
    install(repo, "post-abort", f'echo "abort $REEL_VIEW" >> {log}; exit 1\n')
    kernel.fork(repo, "a")
    res = kernel.commit(repo, "a")
    kernel.fork(repo, "b")
    kernel.abort(repo, "b")
    assert log.read_text().splitlines() == [f"commit a {res.record.hex()} post-commit", "abort b"]


@pytest.mark.parametrize("writable", ["file", "directory"])
def test_a_hook_others_could_write_is_not_run_and_refuses(repo: Repo, writable: str) -> None:
    """A hook is the caller's authority: one that anyone else could have planted or changed never runs."""
    ran = repo.path.parent / "ran"
    path = install(repo, "pre-commit", f"touch {ran}\n")
    (path if writable == "file" else path.parent).chmod(0o777)
    kernel.fork(repo, "a")
    with pytest.raises(CapabilityViolation) as err:
        kernel.commit(repo, "a")
    assert "writable by its group or by others" in err.value.message and not ran.exists()
    (path if writable == "file" else path.parent).chmod(0o755)  # control: the same hook, now private, runs
    kernel.commit(repo, "a")
    assert ran.exists()


def test_a_hook_linked_out_of_the_hooks_directory_is_not_run(repo: Repo) -> None:
    ran = repo.path.parent / "ran"
    elsewhere = repo.path.parent / "elsewhere.sh"
    elsewhere.write_text(f"#!/bin/sh\ntouch {ran}\n")
    elsewhere.chmod(0o755)
    hook = repo.path / "hooks" / "pre-commit"
    hook.unlink()
    hook.symlink_to(elsewhere)
    kernel.fork(repo, "a")
    with pytest.raises(CapabilityViolation) as err:
        kernel.commit(repo, "a")
    assert "symbolic link out of the hooks directory" in err.value.message and not ran.exists()
    hook.unlink()  # control: the same script as the hook itself runs
    install(repo, "pre-commit", f"touch {ran}\n")
    kernel.commit(repo, "a")
    assert ran.exists()
