"""Errors say what they are: a user's missing, unreadable or directory input file is E001/E014 with
its path (exit 4/6), never E007, which is kept for the store's own bytes; and every E-code is in one
table, printed by `reel help errors` and kept in docs/errors.md."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from conftest import REEL

import reelstore
from reelstore.errors import (
    Conflict,
    LockHeld,
    ReelError,
    RemoteConflict,
    RemoteRaceLost,
    StaleLock,
    catalogue,
    table,
)

DOCS = Path(__file__).resolve().parents[2] / "docs" / "errors.md"


def test_put_of_a_missing_file_or_a_directory_names_the_path(tmp_path: Path, reel) -> None:  # noqa: ANN001
    assert reel("init").returncode == 0 and reel("fork", "b").returncode == 0
    missing = reel("put", "b", "x.txt", "/nonexistent-file")
    assert missing.returncode == 4 and missing.stderr == b"error: E001: /nonexistent-file: no such file\n"
    folder = reel("put", "b", "x.txt", str(tmp_path))
    assert folder.returncode == 6 and folder.stderr.decode() == f"error: E014: {tmp_path} is a directory, not a file\n"
    assert json.loads(reel("--json", "status", "b").stdout)["changes"] == []


def test_put_of_an_unreadable_file_is_e014_permission_denied() -> None:
    """Run as an unprivileged user (root reads anything), in a directory that user can reach."""
    setpriv = shutil.which("setpriv")
    assert setpriv, "util-linux setpriv is needed to drop privileges"
    work = Path(tempfile.mkdtemp(prefix="reel-perm-"))
    try:
        work.chmod(0o777)
        env = {k: v for k, v in os.environ.items() if k != "REEL_DIR"}
        nobody = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]
        assert subprocess.run([*nobody, REEL, "init"], cwd=work, env=env, capture_output=True).returncode == 0
        assert subprocess.run([*nobody, REEL, "fork", "b"], cwd=work, env=env, capture_output=True).returncode == 0
        secret = work / "secret.txt"
        secret.write_text("no\n")
        secret.chmod(0)
        denied = subprocess.run(
            [*nobody, REEL, "put", "b", "x.txt", str(secret)], cwd=work, env=env, capture_output=True
        )
        assert denied.returncode == 6, denied.stderr
        assert denied.stderr.decode() == f"error: E014: {secret}: permission denied\n"
    finally:
        shutil.rmtree(work)


def test_verify_pack_of_a_missing_pack_is_e001_and_a_damaged_one_e007(tmp_path: Path, reel) -> None:  # noqa: ANN001
    assert reel("init").returncode == 0
    missing = reel("verify-pack", "/nonexistent.pack")
    assert missing.returncode == 4 and missing.stderr == b"error: E001: /nonexistent.pack: no such file\n"
    folder = reel("verify-pack", str(tmp_path))
    assert folder.returncode == 6 and b"is a directory" in folder.stderr
    assert reel("fork", "a").returncode == 0
    assert reel("put", "a", "f", input=b"x" * 1000).returncode == 0
    assert reel("commit", "a").returncode == 0
    assert reel("repack", "-a", "-d").returncode == 0
    packs = sorted((tmp_path / ".reel" / "objects" / "pack").glob("*.pack"))
    assert packs, "a repack must leave a pack to damage"
    data = bytearray(packs[0].read_bytes())
    data[len(data) // 2] ^= 0xFF
    packs[0].write_bytes(bytes(data))
    damaged = reel("verify-pack", str(packs[0]))
    assert damaged.returncode == 3 and b"E007" in damaged.stderr


def test_every_code_is_in_the_table_and_the_docs_page_holds_it(reel) -> None:  # noqa: ANN001
    codes = [c.code for c in catalogue()]
    assert codes == sorted(set(codes)) and codes[0] == "E000" and "E017" in codes and "E007" in codes
    for cls in catalogue():
        assert issubclass(cls, ReelError) and cls.hint and cls.__doc__, cls
    printed = reel("help", "errors")
    assert printed.returncode == 0 and printed.stdout.decode().strip() == table()
    assert table() in DOCS.read_text(), "docs/errors.md must hold the table `reel help errors` prints; paste it in"
    rows = json.loads(reel("--json", "help", "errors").stdout)
    assert {r["code"]: r["exit"] for r in rows}["E017"] == 9
    assert reel("help", "commit").stdout.startswith(b"Usage: reel commit")
    unknown = reel("help", "no-such-topic")
    assert unknown.returncode == 4 and b"E001" in unknown.stderr


def test_an_os_error_outside_the_store_is_not_called_corruption(reel) -> None:  # noqa: ANN001
    """No command maps this one itself: the entry point tells the store's files from everything else."""
    refused = reel("init", "/sys/reel-cannot-be-here")
    assert refused.returncode == 6 and refused.stderr == b"error: E014: /sys/reel-cannot-be-here: permission denied\n"


def test_hash_object_and_index_pack_name_a_missing_or_directory_input(tmp_path: Path, reel) -> None:  # noqa: ANN001
    assert reel("init").returncode == 0
    missing = reel("hash-object", "/nonexistent-file")
    assert missing.returncode == 4 and missing.stderr == b"error: E001: /nonexistent-file: no such file\n"
    listed = reel("hash-object", "--stdin-paths", input=b"/nonexistent-file\n")
    assert listed.returncode == 4 and b"E001: /nonexistent-file" in listed.stderr
    folder = reel("index-pack", str(tmp_path))
    assert folder.returncode == 6 and folder.stderr.decode() == f"error: E014: {tmp_path} is a directory, not a file\n"
    assert reel("index-pack", "/nonexistent.pack").returncode == 4


def test_sub_kinds_keep_their_parents_codes_and_add_none_to_the_table() -> None:
    for sub, parent in ((LockHeld, Conflict), (StaleLock, LockHeld), (RemoteRaceLost, RemoteConflict)):
        assert issubclass(sub, parent) and (sub.code, sub.exit_status) == (parent.code, parent.exit_status)
        assert sub not in catalogue() and f"| {sub.__name__} |" not in table()
        assert getattr(reelstore, sub.__name__) is sub
