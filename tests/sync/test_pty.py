"""What a person at a terminal sees, through a real pseudo-terminal and real `reel` processes: progress
on a terminal only (clone from a real local remote, push, repack, gc, fsck), `-q` and `--progress` as
git, no escape codes for TERM=dumb; colour and the pager only on a terminal, as configured."""

from __future__ import annotations

import re
from pathlib import Path

from gitserver import bare
from ptyrun import run
from test_sync import grow

from reelstore import sync
from reelstore.backend.repo import Repo
from reelstore.objects import Blob, Record, Tree

XTERM = {"TERM": "xterm"}
_PARTS = re.compile(r"[\r\n]")
PROGRESS_PREFIXES = ("remote: ", "receiving pack: ", "received ", "writing objects: ", "pushing ")


def parts(text: bytes) -> list[str]:
    """What was drawn, part by part: cut at each `\\r`/`\\n`, escape codes and padding dropped."""
    clean = text.decode().replace("\x1b[K", "")
    return [p.strip() for p in _PARTS.split(clean) if p.strip()]


def pushed_remote(tmp_path: Path, n: int = 400) -> Path:
    remote = bare(tmp_path / "r.git")
    a = Repo.init(tmp_path / "a")
    sync.add_remote(a, "origin", str(remote))
    grow(a, n, "tty")
    sync.push(a, "origin")
    return remote


def test_clone_draws_the_remotes_lines_whole_on_a_terminal_only(tmp_path: Path) -> None:
    remote = pushed_remote(tmp_path)
    seen = run("clone", str(remote), "tty", cwd=tmp_path, env=XTERM)
    assert seen.returncode == 0 and b"Cloned" in seen.stdout
    drawn = parts(seen.terminal)
    assert any(re.fullmatch(r"remote: Enumerating objects: \d+, done\.", p) for p in drawn), drawn
    assert any(re.fullmatch(r"remote: Counting objects: 100% \((\d+)/\1\), done\.", p) for p in drawn), drawn
    assert any(re.fullmatch(r"receiving pack: \d+\.\d\d KiB, done\.", p) for p in drawn), drawn
    assert "received 404 objects from origin" in drawn
    # Every part starts where a line starts: no counter is cut mid-word, whatever the sideband's chunks.
    cut = [p for p in drawn if not p.startswith(PROGRESS_PREFIXES)]
    assert cut == []
    assert b"\x1b[K" in seen.terminal  # a terminal that understands it: redraws clear the line's tail

    piped = run("clone", str(remote), "piped", cwd=tmp_path, on_tty=())
    assert piped.returncode == 0 and piped.stderr == b"" and b"Cloned" in piped.stdout

    quiet = run("clone", "-q", str(remote), "quiet", cwd=tmp_path, env=XTERM)
    assert quiet.returncode == 0 and quiet.terminal == b""

    forced = run("clone", "--progress", str(remote), "forced", cwd=tmp_path, on_tty=())
    assert "received 404 objects from origin" in parts(forced.stderr) and b"\x1b" not in forced.stderr

    dumb = run("clone", str(remote), "dumb", cwd=tmp_path, env={"TERM": "dumb"})
    assert dumb.returncode == 0 and "received 404 objects from origin" in parts(dumb.terminal)
    assert b"\x1b" not in dumb.terminal


def test_push_shows_its_objects_being_written(tmp_path: Path) -> None:
    remote = bare(tmp_path / "r.git")
    a = Repo.init(tmp_path / "a")
    sync.add_remote(a, "origin", str(remote))
    grow(a, 50, "p")
    seen = run("-C", "a", "push", cwd=tmp_path, env=XTERM)
    assert seen.returncode == 0, seen
    drawn = parts(seen.terminal)
    assert "pushing 54 objects to origin" in " ".join(drawn)
    assert any(re.fullmatch(r"writing objects: 100% \((\d+)/\1\), done\.", p) for p in drawn), drawn
    grow(a, 1, "q")
    assert run("-C", "a", "push", "--no-progress", cwd=tmp_path, env=XTERM).terminal == b""


def loose_store(path: Path, n: int) -> Repo:
    """A store whose `n` blobs (and their tree and record) are loose: put a few at a time."""
    repo = Repo.init(path)
    blobs = [Blob(b"loose %d" % i) for i in range(n)]
    for i in range(0, n, 5):
        repo.objects.put_many(blobs[i : i + 5])
    tree = Tree(0, tuple((f"b{i:05}", b.id) for i, b in enumerate(blobs)))
    rec = Record(repo.refs["refs/heads/main"], tree.id)
    repo.objects.put_many([tree, rec])
    repo.refs.set("refs/heads/main", rec.id)
    return repo


def test_repack_gc_and_fsck_report_every_phase(tmp_path: Path) -> None:
    repo = loose_store(tmp_path, 1200)
    loose = len(repo.objects.loose_files())  # type: ignore[attr-defined]
    seen = run("repack", "-a", "-d", cwd=tmp_path, env=XTERM)
    assert seen.returncode == 0 and b"packed" in seen.stdout
    drawn = parts(seen.terminal)
    total = int(re.search(rb"packed (\d+) objects", seen.stdout).group(1))  # type: ignore[union-attr]
    for done in (
        f"counting objects: {total}, done.",
        f"packing: 100% ({total}/{total}), done.",
        f"removing loose objects: 100% ({loose}/{loose}), done.",
    ):
        assert done in drawn, (done, drawn)
    between = [p for p in drawn if re.fullmatch(rf"packing: +\d+% \((\d+)/{total}\)", p) and f"({total}/" not in p]
    assert between, drawn  # the counter before the end, redrawn in place

    gc = run("gc", "--prune=now", cwd=tmp_path, env=XTERM)
    assert gc.returncode == 0 and f"marking: {total}, done." in parts(gc.terminal)
    fsck = run("fsck", cwd=tmp_path, env=XTERM)
    assert fsck.returncode == 0
    assert {"verifying packs: 100% (1/1), done.", f"walking: {total}, done."} <= set(parts(fsck.terminal))
    assert f"checked {total} objects" in fsck.terminal.decode()

    for quiet in (
        run("repack", "-a", "-d", "-q", cwd=tmp_path, env=XTERM),
        run("fsck", "-q", cwd=tmp_path, env=XTERM),
        run("gc", "--no-progress", cwd=tmp_path, env=XTERM),
    ):
        assert quiet.returncode == 0 and quiet.terminal == b"", quiet
    piped = run("repack", "-a", "-d", cwd=tmp_path, on_tty=())
    assert piped.returncode == 0 and piped.stderr == b""
    dumb = run("repack", "-a", "-d", cwd=tmp_path, env={"TERM": "dumb"})
    assert f"packing: 100% ({total}/{total}), done." in parts(dumb.terminal) and b"\x1b" not in dumb.terminal


def pager_script(path: Path) -> Path:
    """A pager that records that it ran (with its arguments, LESS and LV) and what it was given."""
    path.write_text('#!/bin/sh\necho "ran $* LESS=$LESS LV=$LV" >> "$0.ran"\ncat >> "$0.got"\n')
    path.chmod(0o755)
    return path


def ran(script: Path) -> list[str]:
    log = script.with_name(script.name + ".ran")
    return log.read_text().splitlines() if log.exists() else []


def test_the_pager_runs_on_a_terminal_only(tmp_path: Path) -> None:
    repo = Repo.init(tmp_path)
    grow(repo, 2, "paged")
    pager = pager_script(tmp_path / "pager")
    everything = ("stdin", "stdout", "stderr")
    env = {**XTERM, "PAGER": str(pager)}
    seen = run("log", cwd=tmp_path, on_tty=everything, env=env)
    assert seen.returncode == 0 and ran(pager) == ["ran  LESS=FRX LV=-c"]
    got = (tmp_path / "pager.got").read_text()
    assert "\x1b[33mrecord " in got and "paged" in got  # coloured for the terminal behind the pager
    assert b"record " not in seen.terminal  # the pager had it all

    piped = run("log", cwd=tmp_path, on_tty=(), env=env)
    assert piped.returncode == 0 and b"record " in piped.stdout and b"\x1b" not in piped.stdout
    assert run("--no-pager", "log", cwd=tmp_path, on_tty=everything, env=env).terminal.count(b"record ") == 2
    assert run("log", cwd=tmp_path, on_tty=everything, env={**XTERM, "PAGER": "cat"}).terminal.count(b"record ") == 2
    assert len(ran(pager)) == 1

    other = pager_script(tmp_path / "other")
    reel_pager = pager_script(tmp_path / "reel-pager")
    repo.config.set("core.pager", f"{other} -S")
    repo.config.save()
    assert run("show", "main", cwd=tmp_path, on_tty=everything, env={**env, "LESS": "R"}).returncode == 0
    assert ran(other) == ["ran -S LESS=R LV=-c"]  # core.pager beats PAGER; a LESS of one's own is kept
    assert (
        run(
            "diff", "main", "main", cwd=tmp_path, on_tty=everything, env={**env, "REEL_PAGER": str(reel_pager)}
        ).returncode
        == 0
    )
    assert len(ran(reel_pager)) == 1 and len(ran(other)) == 1  # REEL_PAGER beats core.pager
    repo.config.set("pager.log", "false")
    repo.config.save()
    assert run("log", cwd=tmp_path, on_tty=everything, env=env).terminal.count(b"record ") == 2
    assert len(ran(other)) == 1 and len(ran(pager)) == 1


def test_colour_follows_the_terminal_no_color_and_color_ui(tmp_path: Path) -> None:
    repo = Repo.init(tmp_path)
    grow(repo, 1, "hue")
    yellow = b"\x1b[33m"

    def log(*options: str, env: dict[str, str] | None = None, on_tty: tuple[str, ...] = ("stdout",)) -> bytes:
        seen = run("--no-pager", *options, "log", "--oneline", cwd=tmp_path, on_tty=on_tty, env=env or XTERM)
        assert seen.returncode == 0, seen
        return seen.terminal if on_tty else seen.stdout

    assert yellow in log()
    assert yellow not in log(on_tty=())
    assert yellow not in log(env={**XTERM, "NO_COLOR": "1"})
    assert yellow in log(env={**XTERM, "NO_COLOR": ""})  # an empty NO_COLOR is unset (no-color.org)
    assert yellow not in log(env={"TERM": "dumb"})
    assert yellow not in log("--color=never") and yellow not in log("--no-color")
    assert yellow in log("--color", "always", on_tty=())
    assert yellow in log("--color=always", env={**XTERM, "NO_COLOR": "1"})  # the command line wins
    repo.config.set("color.ui", "always")
    repo.config.save()
    assert yellow in log(on_tty=()) and yellow in log(env={**XTERM, "NO_COLOR": "1"})
    assert yellow not in log("--no-color")
    repo.config.set("color.ui", "never")
    repo.config.save()
    assert yellow not in log()
    repo.config.set("color.ui", "auto")
    repo.config.save()
    assert yellow in log() and yellow not in log(env={**XTERM, "NO_COLOR": "yes"})


def test_an_effects_diff_is_coloured_as_git_colours_a_diff(tmp_path: Path) -> None:
    from reelstore.api import Store

    store = Store.init(tmp_path)
    a, b = store.fork("a"), store.fork("b")
    for v, amount in ((a, 5), (b, 7)):
        v.effect("http", {"method": "POST", "url": "https://example.invalid/pay", "json": {"amount": amount}})
    seen = run("--no-pager", "diff", "a", "b", cwd=tmp_path, on_tty=("stdout",), env=XTERM)
    assert seen.returncode == 0
    assert b'\x1b[32m+  "amount": 7\x1b[0m' in seen.terminal and b'\x1b[31m-  "amount": 5\x1b[0m' in seen.terminal
    plain = run("diff", "a", "b", cwd=tmp_path, on_tty=())
    assert b'+  "amount": 7' in plain.stdout and b"\x1b" not in plain.stdout


def test_status_views_and_diff_colour_their_marks_on_a_terminal(tmp_path: Path) -> None:
    from reelstore.api import Store

    store = Store.init(tmp_path)
    v = store.fork("v")
    v.put("notes/new.txt", b"n")
    v.effect("http", {"method": "POST", "url": "https://example.invalid/pay", "json": {"amount": 1}})
    green, yellow = b"\x1b[32m", b"\x1b[33m"
    for args, painted in (
        (("status", "v"), (green + b"put", yellow)),
        (("diff", "v"), (green + b"A\x1b[0m\t",)),
        (("views",), (yellow,)),
    ):
        seen = run("--no-pager", *args, cwd=tmp_path, on_tty=("stdout",), env=XTERM)
        assert seen.returncode == 0 and all(p in seen.terminal for p in painted), (args, seen.terminal)
        plain = run(*args, cwd=tmp_path, on_tty=())
        assert plain.returncode == 0 and b"\x1b" not in plain.stdout and plain.stdout.strip(), (args, plain.stdout)
