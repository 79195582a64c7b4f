"""`ls`/`get` read a trunk; a view named like the trunk never becomes fork's source by accident."""

from __future__ import annotations


def test_trunk_reads_and_fork_sources(run, tmp_path):
    run("init")
    run("fork", "w")
    run("put", "w", "a.txt", "-", input=b"trunk data\n")
    run("commit", "w")
    assert run("get", "main", "a.txt").stdout == "trunk data\n"
    assert run("ls", "main").stdout.endswith("\ta.txt\n")
    assert run("get", "main", "nope").exit_code == 4
    assert run("fork", "main").exit_code == 0
    run("put", "main", "b.txt", "-", input=b"view data\n")
    assert run("get", "main", "b.txt").stdout == "view data\n", "a bare name that is a live view reads the view"
    assert run("get", "refs/heads/main", "b.txt").exit_code == 4
    assert "b.txt" not in run("ls", "refs/heads/main").stdout
    assert "from refs/heads/main" in run("fork", "x").stdout, "the default source is the trunk, not view main"
    assert "from refs/heads/main" in run("fork", "y", "--from", "refs/heads/main").stdout
    assert "from refs/views/main" in run("fork", "z", "--from", "refs/views/main").stdout
    both = run("fork", "q", "--from", "main")
    assert both.exit_code == 6 and "both a trunk and a view" in both.stderr
