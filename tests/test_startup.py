"""Start-up: `reel --version` and `reel --help` import no store code, and the command index that lets
them is the commands' own truth."""

from __future__ import annotations

import importlib
import json
import pkgutil
import subprocess
import sys
import textwrap

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
            out.append(f"        {json.dumps(part, ensure_ascii=False)}" + ("),"
                                                                           if i == len(wrapped) - 1 else ""))
    return "\n".join(out)


def test_the_command_index_is_the_commands_own() -> None:
    real = discovered()
    assert COMMANDS == real, "cli/command_index.py is stale; its COMMANDS must read:\n" + render(real)


def _imported_after(*args: str) -> set[str]:
    code = ("import sys\nfrom reelstore.cli.main import main\ntry:\n    main(list(sys.argv[1:]))\n"
            "except SystemExit:\n    pass\nprint('\\n'.join(sorted(sys.modules)))")
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, timeout=60, check=True)
    return set(done.stdout.decode().split())


def test_version_and_help_import_no_store_code() -> None:
    for args in (["--version"], ["--help"], []):
        mods = _imported_after(*args)
        store = sorted(m for m in mods if m.startswith(("reelstore.storage", "reelstore.kernel", "reelstore.objects",
                                                        "reelstore.plumbing.", "reelstore.porcelain.", "dulwich")))
        assert store == [], (args, store)


def test_help_lists_every_command() -> None:
    out = subprocess.run([sys.executable, "-c", "from reelstore.cli.main import main; main(['--help'])"],
                         capture_output=True, timeout=60).stdout.decode()
    listed = {line.split()[0] for line in out.split("Commands:")[1].splitlines() if line.startswith("  ")}
    assert listed == set(COMMANDS)
