"""Start-up behaviour: `reel --version` and `reel --help` answer, the command index they read is the
commands' own truth, and the executable's collector settings. How fast start-up is, is a budget that
bench/bench_fastpaths.py reports (a verb's CPU against the Python floor), not a test."""

from __future__ import annotations

import importlib
import json
import pkgutil
import subprocess
import sys
import textwrap
from pathlib import Path

from reelstore import plumbing, porcelain
from reelstore.cli.command_index import COMMANDS


def discovered() -> dict[str, tuple[str, str]]:
    found: dict[str, tuple[str, str]] = {}
    for package in (plumbing, porcelain):
        for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda i: i.name):
            module = importlib.import_module(f"{package.__name__}.{info.name}")
            for command in getattr(module, "COMMANDS", ()):
                found[command.name] = (module.__name__, command.get_short_help_str(limit=300))
    return found


def render(index: dict[str, tuple[str, str]]) -> str:
    """The body of cli/command_index.py's COMMANDS, as it must read."""
    out = []
    for name, (module, text) in index.items():
        out.append(f"    {json.dumps(name)}: ({json.dumps(module)},")
        wrapped = textwrap.wrap(text, 100, break_long_words=False, break_on_hyphens=False, drop_whitespace=False)
        for i, part in enumerate(wrapped):
            out.append(f"        {json.dumps(part, ensure_ascii=False)}" + (")," if i == len(wrapped) - 1 else ""))
    return "\n".join(out)


def test_the_command_index_is_the_commands_own() -> None:
    real = discovered()
    assert COMMANDS == real, "cli/command_index.py is stale; its COMMANDS must read:\n" + render(real)


_REPORT = """\
import sys
from reelstore.cli.main import main
report, args = sys.argv[1], sys.argv[2:]
status = 0
try:
    main(args)
except SystemExit as exc:
    status = exc.code or 0
with open(report, "w") as f:
    f.write(f"{status}\\n" + "\\n".join(sorted(sys.modules)))
"""


def _imported_after(*args: str, cwd: Path, ok: bool = True) -> set[str]:
    """The modules loaded once `reel ARGS` has run in `cwd`; with `ok`, the command must succeed."""
    report = cwd / "modules.txt"
    done = subprocess.run([sys.executable, "-c", _REPORT, str(report), *args], capture_output=True, timeout=60, cwd=cwd)
    status, *mods = report.read_text().split()
    assert status == "0" or not ok, (args, done.stderr.decode())
    return set(mods)


def test_version_and_help_print_what_they_promise(tmp_path: Path) -> None:
    """`--version` names the installed version; `--help` outside any store still lists the commands."""
    from reelstore import __version__

    script = "from reelstore.cli.main import main; main(['--version'])"
    version = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=60, cwd=tmp_path, text=True)
    assert version.stdout.strip() == f"reel, version {__version__}", version.stderr
    assert _imported_after("--help", cwd=tmp_path)  # no store here, and help needs none


def test_help_lists_every_command() -> None:
    out = subprocess.run(
        [sys.executable, "-c", "from reelstore.cli.main import main; main(['--help'])"], capture_output=True, timeout=60
    ).stdout.decode()
    sections: dict[str, set[str]] = {}
    heading = ""
    for line in out.splitlines():
        if line.endswith(":") and not line.startswith(" "):
            heading = line
        elif line.startswith("  ") and heading.split()[1:2] == ["commands"]:
            sections.setdefault(heading.split()[0], set()).add(line.split()[0])
    # grouped as git groups its commands, by where each command's module lives
    assert sections == {
        "Porcelain": {n for n, (m, _) in COMMANDS.items() if m.startswith("reelstore.porcelain.")},
        "Plumbing": {n for n, (m, _) in COMMANDS.items() if m.startswith("reelstore.plumbing.")},
    }
    assert {"commit", "fork", "run"} <= sections["Porcelain"] and {"cat-file", "update-ref"} <= sections["Plumbing"]
    assert set().union(*sections.values()) == set(COMMANDS)


def test_a_mistyped_command_names_the_closest_ones() -> None:
    def ask(name: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            [sys.executable, "-c", f"from reelstore.cli.main import main; main([{name!r}])"],
            capture_output=True,
            timeout=60,
        )

    typo = ask("comit")
    assert typo.returncode == 2 and b"No such command 'comit'. Did you mean commit?" in typo.stderr
    assert b"Did you mean cat-file?" in ask("cat-fil").stderr
    unlike = ask("xyzzy")
    assert unlike.returncode == 2 and b"No such command 'xyzzy'." in unlike.stderr and b"Did you" not in unlike.stderr


def test_the_sync_package_names_stay_functions() -> None:
    """`push`, `fetch` and `abort` name functions even after their same-named submodules are imported
    (which binds a module on its package)."""
    script = (
        "import sys, importlib; from reelstore import sync; "
        "importlib.import_module('reelstore.sync.push'); importlib.import_module('reelstore.sync.abort'); "
        "from reelstore.sync import fetch; "
        "print(callable(sync.push), "
        "callable(sync.abort), callable(fetch), sync.push.__module__, sorted(sync.__all__) == "
        "sorted(n for n in sync.__all__ if hasattr(sync, n)))"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=60, text=True)
    assert out.stdout.split() == ["True", "True", "True", "reelstore.sync.push", "True"], out.stderr


_FREEZE = """\
import gc, sys
from click.testing import CliRunner
from reelstore.cli.main import cli, main
CliRunner().invoke(cli, ["--version"])
embedded = gc.get_freeze_count()
try:
    main(["--version"])
except SystemExit:
    pass
print(embedded, gc.get_freeze_count())
"""


def test_the_executable_freezes_its_heap_at_exit_and_an_embedded_cli_does_not(tmp_path: Path) -> None:
    """`main` (the executable) freezes what lives to the exit, so the exit's collection walks none of it;
    the click group run inside another program (a test runner, an agent) must leave its heap alone."""
    done = subprocess.run([sys.executable, "-c", _FREEZE], capture_output=True, timeout=60, cwd=tmp_path, check=True)
    embedded, after = (int(n) for n in done.stdout.splitlines()[-1].split())
    assert embedded == 0
    assert after > 1000


_COLLECTIONS = """\
import gc, sys
from click.testing import CliRunner
from reelstore.cli.main import YOUNG_COLLECTION_EVERY, cli, main
default = gc.get_threshold()[0]
CliRunner().invoke(cli, ["--version"])
embedded = gc.get_threshold()[0]
runs = []
gc.callbacks.append(lambda phase, info: runs.append(info["generation"]) if phase == "start" else None)
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print(default, embedded, gc.get_threshold()[0], YOUNG_COLLECTION_EVERY, len(runs))
"""


def test_the_executable_runs_a_short_verb_without_a_collection_and_an_embedded_cli_keeps_the_default(
    tmp_path: Path,
) -> None:
    """What a short verb allocates lives to the exit: the executable collects young objects every
    YOUNG_COLLECTION_EVERY allocations instead of every 700, so `cat-file -p` runs no collection at all
    (it ran seven). The click group run inside another program leaves the interpreter's threshold alone."""
    _imported_after("init", cwd=tmp_path)
    head = (tmp_path / ".reel" / "refs" / "heads" / "main").read_text()[:64]
    done = subprocess.run(
        [sys.executable, "-c", _COLLECTIONS, "cat-file", "-p", head],
        capture_output=True,
        timeout=60,
        cwd=tmp_path,
        check=True,
    )
    default, embedded, after, every, collections = (int(n) for n in done.stdout.splitlines()[-1].split())
    assert embedded == default == 700
    assert after == every > default
    assert collections == 0
