"""Plumbing output formats against real git: the same ref names and file names in a git repository
and in a reel store, the same command line to both, and the outputs compared by shape (ids, sizes and
kinds masked; field order, separators, quoting and NUL termination kept)."""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner
from gitserver import GIT_ENV

from reelstore.api import Store
from reelstore.cli.main import cli

NAMES = {
    "a.txt": b"one\n",
    "tab\tname": b"t\n",
    "new\nline": b"n\n",
    "sp ace": b"s\n",
    'q"uote': b"q\n",
    "back\\slash": b"b\n",
    "caf\u00e9": b"c\n",
}
REFS = ("refs/heads/topic/one", "refs/tags/v1")


@dataclass
class Pair:
    git_dir: Path
    reel_dir: Path

    def git(self, args: list[str], stdin: bytes = b"") -> bytes:
        proc = subprocess.run(
            ["git", *args], cwd=self.git_dir, input=stdin, capture_output=True, env=GIT_ENV, timeout=60
        )
        assert proc.returncode == 0, (args, proc.stderr)
        return proc.stdout

    def reel(self, args: list[str], stdin: bytes = b"") -> bytes:
        out = CliRunner().invoke(cli, ["-C", str(self.reel_dir), *args], input=stdin)
        assert out.exit_code == 0, (args, out.output, out.stderr)
        return out.stdout_bytes


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Pair:
    """Two commits / records on main: the first holds a.txt, the second every name of NAMES;
    topic/one points at the first, the tag v1 at the second."""
    g = tmp_path_factory.mktemp("git")
    r = tmp_path_factory.mktemp("reel")
    p = Pair(g, r)
    p.git(["init", "-q", "-b", "main"])
    (g / "a.txt").write_bytes(b"first\n")
    p.git(["add", "."])
    p.git(["commit", "-q", "-m", "first"])
    for name, data in NAMES.items():
        (g / name).write_bytes(data)
    p.git(["add", "."])
    p.git(["commit", "-q", "-m", "second"])
    p.git(["update-ref", REFS[0], "main~1"])
    p.git(["update-ref", REFS[1], "main"])
    store = Store.init(r)
    with store.view("one") as v:
        v.put("a.txt", b"first\n")
    with store.view("two") as v:
        for name, data in NAMES.items():
            v.put(name, data)
    p.reel(["update-ref", REFS[0], "main~1"])
    p.reel(["update-ref", REFS[1], "main"])
    return p


def shape(out: bytes) -> bytes:
    """Mask what legitimately differs (ids: 40 hex in git, 64 in reel; kinds; sizes)."""
    out = re.sub(rb"\b[0-9a-f]{64}\b|\b[0-9a-f]{40}\b", b"<id>", out)
    out = re.sub(rb"\b[0-9a-f]{7}\b", b"<short>", out)
    out = re.sub(rb"\b(commit|record)\b", b"<commit>", out)
    return re.sub(rb"\b\d+\b", b"<n>", out)


CASES = [
    ("cat-file batch-check default", ["cat-file", "--batch-check"], b"main\nmain:a.txt\n"),
    ("cat-file batch-check missing and empty line", ["cat-file", "--batch-check"], b"nope\n\nmain\n"),
    (
        "cat-file batch-check format with rest",
        ["cat-file", "--batch-check=%(objecttype) %(objectname) [%(rest)] %(objectsize)"],
        b"main some words\nmain:a.txt\tx\n",
    ),
    ("cat-file batch-check objectname only", ["cat-file", "--batch-check=%(objectname)"], b"main:a.txt\n"),
    ("cat-file batch blob", ["cat-file", "--batch"], b"main:a.txt\nmain~1:a.txt\n"),
    ("cat-file batch format", ["cat-file", "--batch=%(objectsize) %(objecttype)"], b"main:a.txt\n"),
    ("cat-file -z", ["cat-file", "-z", "--batch-check"], b"main:a.txt\0main\0nope\0"),
    ("cat-file TYPE OBJ", ["cat-file", "blob", "main:a.txt"], b""),
    ("cat-file -p blob", ["cat-file", "-p", "main~1:a.txt"], b""),
    ("cat-file -t", ["cat-file", "-t", "main:a.txt"], b""),
    ("cat-file -s", ["cat-file", "-s", "main:a.txt"], b""),
    ("for-each-ref default", ["for-each-ref", "refs/heads", "refs/tags"], b""),
    (
        "for-each-ref modifiers",
        [
            "for-each-ref",
            "--format=%(refname:short)|%(refname:lstrip=2)|%(refname:rstrip=1)|%(refname:lstrip=-1)"
            "|%(objectname:short=7)|%(objecttype)",
            "refs/heads",
            "refs/tags",
        ],
        b"",
    ),
    (
        "for-each-ref sort count",
        ["for-each-ref", "--sort=-refname", "--count=2", "--format=%(refname)", "refs/heads", "refs/tags"],
        b"",
    ),
    ("for-each-ref points-at", ["for-each-ref", "--points-at=main~1", "--format=%(refname)"], b""),
    ("show-ref", ["show-ref", "--heads"], b""),
    ("show-ref --tags", ["show-ref", "--tags"], b""),
    ("show-ref --verify", ["show-ref", "--verify", "refs/heads/main", "refs/tags/v1"], b""),
    ("show-ref -s", ["show-ref", "-s", "--verify", "refs/heads/main"], b""),
    ("show-ref --abbrev", ["show-ref", "--abbrev=7", "one"], b""),
    ("ls-tree", ["ls-tree", "main"], b""),
    ("ls-tree -r", ["ls-tree", "-r", "main~1"], b""),
    ("ls-tree -z", ["ls-tree", "-z", "main"], b""),
    ("ls-tree --name-only", ["ls-tree", "--name-only", "main"], b""),
    ("ls-tree --name-only -z", ["ls-tree", "--name-only", "-z", "main"], b""),
]


@pytest.mark.parametrize("args,stdin", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_same_shape_as_git(pair: Pair, args: list[str], stdin: bytes) -> None:
    want = pair.git(args, stdin)
    got = pair.reel(args, stdin)
    assert want, "git printed nothing: the case checks nothing"
    assert shape(got) == shape(want), (got, want)


def test_update_ref_stdin_z_same_effect_as_git(pair: Pair) -> None:
    """The same -z transaction (option line, create, update with an empty OLD, verify of an absent
    ref, delete) leaves the same ref names in both, and a bad option fails in both."""
    script = (
        b"option no-deref\0create refs/heads/z/new\0main~1\0update refs/heads/z/moved\0main\0\0"
        b"verify refs/heads/z/absent\0\0start\0update refs/tags/z\0main\0\0commit\0"
    )
    for side in (pair.git, pair.reel):
        side(["update-ref", "--stdin", "-z"], script)
        side(["update-ref", "--stdin", "-z"], b"delete refs/heads/z/moved\0\0")
    assert shape(pair.reel(["show-ref"])).replace(b"<commit>", b"") == shape(pair.git(["show-ref"]))
    got = pair.reel(["show-ref", "-s", "--verify", "refs/heads/z/new"]).strip()
    assert got == pair.reel(["show-ref", "-s", "--verify", "refs/heads/topic/one"]).strip()
    bad = CliRunner().invoke(
        cli, ["-C", str(pair.reel_dir), "update-ref", "--stdin", "-z"], input=b"option deref-nothing\0"
    )
    assert bad.exit_code == 6 and "unknown option" in bad.stderr
    assert (
        subprocess.run(
            ["git", "update-ref", "--stdin", "-z"],
            cwd=pair.git_dir,
            input=b"option deref-nothing\0",
            capture_output=True,
            env=GIT_ENV,
        ).returncode
        != 0
    )
    for side in (pair.git, pair.reel):
        side(["update-ref", "-d", "refs/heads/z/new"])
        side(["update-ref", "-d", "refs/tags/z"])
