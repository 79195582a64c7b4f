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


def test_log_oneline_graph_config_get_and_grammar(run, tmp_path):
    run("init")
    for i in range(2):
        run("fork", f"v{i}")
        run("put", f"v{i}", "a.txt", "-", input=f"{i}\n".encode())
        run("commit", f"v{i}", "-m", f"change {i}\nbody")
    lines = run("log", "--oneline").stdout.splitlines()
    assert [ln.split(" ", 1)[1] for ln in lines] == ["change 1", "change 0", "start trunk main"]
    assert all(len(ln.split(" ", 1)[0]) == 12 for ln in lines)
    assert run("log", "--oneline", "--graph", "-n", "1").stdout.startswith("* ")
    graph = run("log", "--graph", "-n", "2").stdout.splitlines()
    assert graph[0].startswith("* record ") and all(ln.startswith(("* ", "|")) for ln in graph)
    assert run("config", "--get", "core.trunk").stdout == "main\n"
    assert run("config", "--get", "no.such").exit_code == 4
    assert run("config", "--get", "core.trunk", "x").exit_code == 2
    pack = run("repack").stdout
    assert " 1 objects" not in pack and " 1 packs" not in pack
