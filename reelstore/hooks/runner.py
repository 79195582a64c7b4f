"""Running `.reel/hooks/*` as git runs its hooks: only executable files, context in the environment.

A pre-hook (`pre-commit`, `pre-drain`, `pre-approve`) that exits non-zero refuses the verb with E009 and its stderr
in the message; a post-hook's status is ignored. A hook that does not finish within
`hooks.timeout` seconds (default 60) is killed and counts as a refusal.

A hook runs with the caller's authority, so it is taken only from a file, and a hooks directory, that
no one else could have written: owned by the caller (or root), not writable by group or others, and
not a symbolic link out of the hooks directory (a file elsewhere is guarded by nothing of the store's).
A hook that fails this is not run and counts as a refusal (exit 126), naming the reason.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from reelstore.errors import CapabilityViolation
from reelstore.hooks import HOOK_NAMES

if TYPE_CHECKING:
    from reelstore.backend.repo import Repo

DEFAULT_TIMEOUT = 60


def hook_path(repo: Repo, name: str) -> Path | None:
    """The hook's file if it exists and is executable; an in-memory store has no hooks."""
    if name not in HOOK_NAMES:
        raise ValueError(f"unknown hook {name!r}")
    return repo.files.executable(f"hooks/{name}")


def run_hook(repo: Repo, name: str, env: Mapping[str, str]) -> tuple[int, str] | None:
    """Run hook `name` if enabled; (exit status, stderr) or None when there is no such hook."""
    path = hook_path(repo, name)
    if path is None:
        return None
    unsafe = _writable_by_others(path)
    if unsafe:
        return 126, f"hook {name} was not run: {unsafe}"
    import subprocess  # only when a hook exists: most verbs in most stores run none

    full = dict(os.environ)
    full.update(env)
    full["REEL_DIR"] = str(repo.path)
    full["REEL_HOOK"] = name
    timeout = int(repo.config.get("hooks.timeout", str(DEFAULT_TIMEOUT)) or DEFAULT_TIMEOUT)
    try:
        proc = subprocess.run(
            [str(path)],
            cwd=str(path.parent.parent.parent),
            env=full,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return 124, f"hook {name} did not finish within {timeout}s"
    except OSError as exc:
        return 126, f"hook {name} could not run: {exc}"
    return proc.returncode, proc.stderr.decode("utf-8", "replace").strip()


def _writable_by_others(path: Path) -> str:
    """Why someone other than the caller could have written the hook, or ''."""
    if path.is_symlink() and path.resolve().parent != path.parent.resolve():
        return f"{path} is a symbolic link out of the hooks directory (to {path.resolve()})"
    me = os.geteuid()
    for p in (path, path.parent):
        st = os.stat(p)
        if st.st_uid not in (me, 0):
            return f"{p} is owned by uid {st.st_uid}, not by this user"
        if st.st_mode & 0o022:
            return f"{p} is writable by its group or by others"
    return ""


def run_pre_hook(repo: Repo, name: str, env: Mapping[str, str]) -> None:
    """Run a pre-hook; a non-zero exit refuses the verb (E009, exit 6)."""
    outcome = run_hook(repo, name, env)
    if outcome is not None and outcome[0] != 0:
        status, err = outcome
        said = f": {err}" if err else ""
        raise CapabilityViolation(f"the {name} hook refused (exit {status}){said}", hook=name, status=status)
