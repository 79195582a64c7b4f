"""update-ref's git options (--create-reflog, --no-deref, --stdin -z, option lines) and for-each-ref's
--sort, --count, --points-at and atom modifiers."""

from __future__ import annotations

from reelstore.backend.repo import Repo


def _main(tmp_path) -> str:
    value = Repo.open(tmp_path).refs.get("refs/heads/main")
    assert value is not None
    return value.hex()


def test_create_reflog_keeps_a_log_where_none_would_be(run, tmp_path):
    run("init")
    main = _main(tmp_path)
    assert run("update-ref", "refs/tags/plain", main).exit_code == 0
    assert run("reflog", "refs/tags/plain").exit_code == 4
    assert run("update-ref", "--create-reflog", "-m", "made", "refs/tags/logged", main).exit_code == 0
    assert run("reflog", "refs/tags/logged").stdout == f"{main[:12]} refs/tags/logged@{{0}}: made\n"
    run("update-ref", "-m", "again", "refs/tags/logged", main)
    assert "again" in run("reflog", "refs/tags/logged").stdout.splitlines()[0], "an existing reflog keeps logging"
    assert run("update-ref", "--stdin", "--create-reflog", input="create refs/tags/s " + main + "\n").exit_code == 0
    assert run("reflog", "refs/tags/s").exit_code == 0
    assert run("update-ref", "--no-deref", "refs/tags/plain", main, main).exit_code == 0


def test_stdin_z_and_option_lines(run, tmp_path):
    run("init")
    main = _main(tmp_path)
    ok = run("update-ref", "--stdin", "-z", input=f"create refs/tags/a\0{main}\0verify refs/tags/b\0\0".encode())
    assert ok.exit_code == 0, ok.stderr
    assert run("show-ref", "-s", "--verify", "refs/tags/a").stdout == main + "\n"
    assert run("update-ref", "--stdin", input=f"option no-deref\nupdate refs/tags/a {main} {main}\n").exit_code == 0
    short = run("update-ref", "--stdin", "-z", input=f"update refs/tags/a\0{main}".encode())
    assert short.exit_code == 6 and "NUL" in short.stderr
    cut = run("update-ref", "--stdin", "-z", input=f"update refs/tags/a\0{main}\0".encode())
    assert cut.exit_code == 6 and "ends before its values" in cut.stderr
    assert run("update-ref", "-z", "refs/tags/a", main).exit_code == 2


def test_for_each_ref_sort_count_points_at(run, tmp_path):
    run("init")
    main = _main(tmp_path)
    for name in ("refs/tags/b", "refs/tags/a", "refs/tags/c/d"):
        run("update-ref", name, main)
    fmt = ["--format", "%(refname)"]
    assert run("for-each-ref", *fmt, "--sort=-refname", "refs/tags").stdout.split() == [
        "refs/tags/c/d",
        "refs/tags/b",
        "refs/tags/a",
    ]
    assert run("for-each-ref", *fmt, "--sort=refname", "--count=1", "refs/tags").stdout == "refs/tags/a\n"
    assert len(run("for-each-ref", *fmt, f"--points-at={main[:8]}").stdout.split()) == 4
    assert run("for-each-ref", *fmt, "--points-at=main", "refs/tags/c").stdout == "refs/tags/c/d\n"
    mods = run(
        "for-each-ref", "--format", "%(refname:lstrip=2) %(refname:rstrip=-2) %(objectname:short=6)", "refs/tags/c"
    )
    assert mods.stdout == f"c/d refs/tags {main[:6]}\n"
    bad = run("for-each-ref", "--format", "%(refname:bogus)")
    assert bad.exit_code == 6 and "short, lstrip=N or rstrip=N" in bad.stderr
    assert run("for-each-ref", "--sort=nosuch").exit_code == 6
