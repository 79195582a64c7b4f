"""Every count a command takes is bounded: a negative or astronomically large number is a usage error
naming the option (or E014), never a traceback, and a sane one still works."""

from __future__ import annotations

from pathlib import Path

import pytest

CASES = [
    ["log", "-n"],
    ["op", "log", "-n"],
    ["reflog", "-n"],
    ["rev-list", "refs/heads/main", "-n"],
    ["for-each-ref", "--count"],
    ["sim", "--seeds", "1", "--start"],
]


@pytest.mark.parametrize("argv", CASES, ids=lambda a: " ".join(a))
@pytest.mark.parametrize("value", ["-1", str(2**63), "999999999999999999999"])
def test_out_of_range_counts_are_refused_without_a_traceback(reel, tmp_path: Path, argv: list[str], value: str) -> None:
    reel("init", check=True)
    done = reel(*argv, value)
    assert done.returncode != 0, done.stdout.decode()
    said = (done.stdout + done.stderr).decode()
    assert "Traceback" not in said and ("E014" in said or "Invalid value" in said), said
    assert argv[-1] in said or "limit" in said


@pytest.mark.parametrize("argv", CASES[:5], ids=lambda a: " ".join(a))
def test_a_sane_count_still_works(reel, tmp_path: Path, argv: list[str]) -> None:
    reel("init", check=True)
    assert reel(*argv, "3").returncode == 0
