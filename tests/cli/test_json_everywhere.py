"""`--json` on every command, before or after the command name: one JSON document on stdout, and every
error (usage errors included) one JSON error object on stderr."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from reelstore.backend.repo import Repo
from reelstore.cli.main import ReelGroup, cli
from reelstore.kernel import verbs as kernel

EVERY = sorted(ReelGroup().list_commands(click.Context(cli)))


def _invoke(tmp_path: Path, *args: str, input: bytes | str | None = None):
    return CliRunner().invoke(cli, ["-C", str(tmp_path), *args], input=input, prog_name="reel")


def _commands(group: click.Group, names: list[str]) -> list[tuple[str, ...]]:
    out: list[tuple[str, ...]] = []
    for name in names:
        cmd = group.get_command(click.Context(group), name)
        assert cmd is not None, name
        out.append((name,))
        if isinstance(cmd, click.Group):
            out += [(name, sub) for sub in cmd.list_commands(click.Context(cmd))]
    return out


@pytest.mark.parametrize("path", _commands(cli, EVERY), ids=" ".join)
def test_usage_error_is_one_json_error_object(tmp_path: Path, path: tuple[str, ...]) -> None:
    # `run` and `replay` pass unknown options on to their command, so their usage error is another one.
    if path in (("run",), ("replay",)):
        source = ["SOURCE"] if path == ("replay",) else []
        bad, said = ["--commit", "--abort", "--json", *source, "--", "true"], "--abort"
    else:
        bad, said = ["--no-such-option-here", "--json"], "--no-such-option-here"
    out = _invoke(tmp_path, *path, *bad)
    assert out.exit_code == 2, out.output
    assert out.stdout == ""
    doc = json.loads(out.stderr)
    assert doc["error"]["code"] == "usage" and doc["error"]["exit"] == 2
    assert said in doc["error"]["message"]
    assert doc["error"]["usage"].startswith("Usage: reel " + " ".join(path))


def test_usage_errors_of_the_group_and_unknown_commands(tmp_path: Path) -> None:
    for args in (
        ["--json", "no-such-command"],
        ["--no-such-global", "--json"],
        ["--json", "cat-file", "-t", "-p", "x"],
    ):
        out = _invoke(tmp_path, *args)
        assert out.exit_code == 2 and json.loads(out.stderr)["error"]["code"] == "usage", args
    plain = _invoke(tmp_path, "cat-file", "--bogus", "--", "--json")
    assert plain.exit_code == 2 and "Error:" in plain.stderr, "--json after -- belongs to someone else"


@pytest.fixture
def store(tmp_path: Path) -> Path:
    for args in (
        ["init"],
        ["fork", "done"],
        ["put", "done", "a.txt", "-"],
        ["commit", "done", "-m", "one"],
        ["fork", "w"],
        ["put", "w", "b.txt", "-"],
    ):
        out = _invoke(tmp_path, *args, input=b"data\n")
        assert out.exit_code == 0, (args, out.output)
    return tmp_path


SUCCEEDS = [
    ["status", "w"],
    ["views"],
    ["ls", "w"],
    ["get", "w", "b.txt"],
    ["log"],
    ["diff", "w"],
    ["show", "main"],
    ["cat-file", "-t", "main"],
    ["cat-file", "-p", "main:a.txt"],
    ["show-ref"],
    ["for-each-ref"],
    ["ls-tree", "main"],
    ["rev-list", "main"],
    ["reflog"],
    ["count-objects"],
    ["fsck"],
    ["config", "--list"],
    ["config", "core.trunk"],
    ["remote"],
    ["ops"],
    ["ops", "--unresolved"],
    ["hash-object", "--stdin"],
    ["verify-pack"],
    ["repack"],
    ["fork", "x"],
    ["put", "w", "c.txt", "-"],
    ["rm", "w", "b.txt"],
    ["abort", "w"],
    ["hold", "--why", "test"],
    ["release"],
    ["update-ref", "refs/tags/t", "main"],
    ["gc"],
    ["prune"],
    ["snapshot", "w", "snap"],
]


@pytest.mark.parametrize("args", SUCCEEDS, ids=" ".join)
@pytest.mark.parametrize("where", ["before", "after"])
def test_one_document_on_stdout(store: Path, args: list[str], where: str) -> None:
    argv = ["--json", *args] if where == "before" else [*args, "--json"]
    out = _invoke(store, *argv, input=b"input\n")
    assert out.exit_code == 0, (argv, out.output, out.stderr)
    json.loads(out.stdout)


@pytest.mark.parametrize(
    "args,status",
    [
        (["cat-file", "-t", "nope"], 4),
        (["get", "w", "nope"], 4),
        (["status", "nope"], 4),
        (["for-each-ref", "--format=%(x)"], 6),
        (["commit", "nope"], 4),
    ],
    ids=lambda a: " ".join(a) if isinstance(a, list) else "",
)
def test_errors_are_one_json_error_object(store: Path, args: list[str], status: int) -> None:
    out = _invoke(store, *args, "--json")
    assert out.exit_code == status and out.stdout == ""
    err = json.loads(out.stderr)["error"]
    assert err["exit"] == status and err["code"].startswith("E")


def test_demo_and_run_take_json(tmp_path: Path) -> None:
    out = _invoke(tmp_path, "--json", "demo", "--dir", str(tmp_path / "demo"))
    assert out.exit_code == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["fired"] == ["reports/final.txt"] and doc["dropped_effect_fired"] is False
    assert {"command": ["reel", "init"]}.items() <= doc["steps"][1].items()
    _invoke(tmp_path, "init")
    ran = _invoke(tmp_path, "run", "--json", "--abort", "--", "true")
    assert ran.exit_code == 0, ran.stderr
    assert json.loads(ran.stdout)["command"] == ["true"]


def test_cat_file_p_prints_the_one_encoders_text(tmp_path: Path) -> None:
    """`cat-file -p` writes an object as every `--json` document is written: indented, keys sorted,
    non-ASCII as it is (a name with a quote, a newline and an accent shows each rule)."""
    repo = Repo.init(tmp_path)
    kernel.fork(repo, "v")
    kernel.put(repo, "v", "dir/a.txt", b"x")
    kernel.put(repo, "v", 'b\n\u00e9"q".txt', b"y")
    view = repo.refs["refs/views/v"]
    shown = repo.objects.get(view)
    ids = [view, repo.refs["refs/heads/main"], shown.namespace, *shown.caps]  # type: ignore[attr-defined]
    script = "import sys; from reelstore.cli.main import main; main(sys.argv[1:])"
    kinds = set()
    for h in ids:
        obj = repo.objects.get(h)
        kinds.add(obj.kind)
        done = subprocess.run(
            [sys.executable, "-c", script, "cat-file", "-p", h.hex()], cwd=tmp_path, capture_output=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        want = json.dumps(obj.to_json(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
        assert done.stdout == want.encode("utf-8"), obj.kind
    assert kinds == {"view", "record", "tree", "capability"}
