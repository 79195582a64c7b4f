"""Start-up: `reel --version` and `reel --help` import no store code, and the command index that lets
them is the commands' own truth."""

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
            out.append(f"        {json.dumps(part, ensure_ascii=False)}" + ("),"
                                                                           if i == len(wrapped) - 1 else ""))
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
    done = subprocess.run([sys.executable, "-c", _REPORT, str(report), *args], capture_output=True, timeout=60,
                          cwd=cwd)
    status, *mods = report.read_text().split()
    assert status == "0" or not ok, (args, done.stderr.decode())
    return set(mods)


def test_version_and_help_import_no_store_code(tmp_path: Path) -> None:
    for args in (["--version"], ["--help"], []):
        mods = _imported_after(*args, cwd=tmp_path, ok=bool(args))
        store = sorted(m for m in mods if m.startswith(("reelstore.storage", "reelstore.kernel", "reelstore.objects",
                                                        "reelstore.plumbing.", "reelstore.porcelain.", "dulwich")))
        assert store == [], (args, store)


def test_help_lists_every_command() -> None:
    out = subprocess.run([sys.executable, "-c", "from reelstore.cli.main import main; main(['--help'])"],
                         capture_output=True, timeout=60).stdout.decode()
    sections: dict[str, set[str]] = {}
    heading = ""
    for line in out.splitlines():
        if line.endswith(":") and not line.startswith(" "):
            heading = line
        elif line.startswith("  ") and heading.split()[1:2] == ["commands"]:
            sections.setdefault(heading.split()[0], set()).add(line.split()[0])
    # grouped as git groups its commands, by where each command's module lives
    assert sections == {"Porcelain": {n for n, (m, _) in COMMANDS.items() if m.startswith("reelstore.porcelain.")},
                        "Plumbing": {n for n, (m, _) in COMMANDS.items() if m.startswith("reelstore.plumbing.")}}
    assert {"commit", "fork", "run"} <= sections["Porcelain"] and {"cat-file", "update-ref"} <= sections["Plumbing"]
    assert set().union(*sections.values()) == set(COMMANDS)


def test_a_mistyped_command_names_the_closest_ones() -> None:
    def ask(name: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run([sys.executable, "-c", f"from reelstore.cli.main import main; main([{name!r}])"],
                              capture_output=True, timeout=60)

    typo = ask("comit")
    assert typo.returncode == 2 and b"No such command 'comit'. Did you mean commit?" in typo.stderr
    assert b"Did you mean cat-file?" in ask("cat-fil").stderr
    unlike = ask("xyzzy")
    assert unlike.returncode == 2 and b"No such command 'xyzzy'." in unlike.stderr and b"Did you" not in unlike.stderr


KERNEL_AND_UP = ("reelstore.kernel", "reelstore.drain", "reelstore.sync", "reelstore.maintenance", "reelstore.api",
                 "reelstore.adapters", "reelstore.intercept", "reelstore.hooks", "reelstore.sim", "dulwich")
PACKS = ("reelstore.storage.disk_store", "reelstore.storage.pack", "reelstore.storage.batch",
         "reelstore.storage.segment", "reelstore.codec", "reelstore.objects.block")
"""The object store and the codec: a verb that reads only refs has no use for them."""
STDLIB_EXTRAS = {"secrets", "hmac", "random", "json", "dataclasses", "signal", "getpass", "click.shell_completion"}
"""Standard modules click itself does not load, which the hot verbs leave alone too."""


READ_PATH_EXTRAS = ("reelstore.storage.batch", "reelstore.storage.pack_import", "reelstore.storage.segment",
                    "reelstore.storage.bulk_read", "reelstore.cli.formats", "reelstore.storage.pack_verify")
"""What only a writer, a batch or a miss in packs and loose files uses: the write batch and index repair,
pack import, journal segments, cat-file's batch reader and its format atoms; and a whole pack's check."""
LAZY_STDLIB = {"array", "bisect", "binascii", "fcntl"}
"""Standard modules that only a whole-index read, an index build, a batch or a lock taker needs."""


def _loaded(mods: set[str], prefixes: tuple[str, ...]) -> list[str]:
    return sorted(m for m in mods if m.startswith(prefixes))


def test_hot_verbs_import_only_what_they_use(tmp_path: Path) -> None:
    """show-ref reads refs only; cat-file -p and update-ref read objects but no kernel, drain, sync or
    maintenance code, and load only the object kinds they meet."""
    _imported_after("init", cwd=tmp_path)
    head = (tmp_path / ".reel" / "refs" / "heads" / "main").read_text()[:64]
    show = _imported_after("show-ref", cwd=tmp_path)
    assert _loaded(show, KERNEL_AND_UP + PACKS + ("reelstore.revisions", "reelstore.namespace")) == []
    assert sorted(show & STDLIB_EXTRAS) == []
    assert _loaded(show, ("reelstore.objects.",)) == ["reelstore.objects.hash"]
    assert _loaded(show, ("reelstore.storage.ref_transaction", "reelstore.storage.reflog",  # writers' parts
                          "reelstore.storage.verb_log", "reelstore.storage.ref_locks",
                          "reelstore.storage.state_files", "reelstore.crashpoints")) == []  # nor the
    # state files (it keeps none) or the crash points (it writes nothing)
    assert sorted(show & LAZY_STDLIB) == []
    for args in (["cat-file", "-p", head], ["cat-file", "-t", "main"], ["update-ref", "refs/heads/b", head]):
        mods = _imported_after(*args, cwd=tmp_path)
        assert _loaded(mods, READ_PATH_EXTRAS + ("reelstore.storage.state_files",)) == [], args
        assert sorted(mods & LAZY_STDLIB) == [], args  # a ref write checks its name against packed refs with
        # bisect, and this store has none
        assert "reelstore.storage.ref_locks" not in mods, args  # a ref write writes its lock's line (ref_format)
        # and reads no lock back unless one is in its way
        assert ("reelstore.crashpoints" in mods) == (args[0] == "update-ref"), args  # a writer's
        assert "reelstore.cli.terminal" not in mods, args  # colour and pager for styled or paged text only:
        # -t's line has no styling to keep or strip
        assert ("reelstore.wording" in mods) == (args[-1] == "main"), args  # the revision parser's; a sound
        # pack's open words no message
        assert _loaded(mods, KERNEL_AND_UP + ("reelstore.namespace",)) == [], args
        assert sorted(mods & STDLIB_EXTRAS) == [], args  # getpass too: the login name is read without it; json
        # too: -p writes json.dumps' text itself (cli/json_text)
        assert ("reelstore.cli.json_text" in mods) == (args[1] == "-p"), args
        kinds = {m.rpartition(".")[2] for m in _loaded(mods, ("reelstore.objects.",))}
        assert kinds <= {"hash", "block", "record"}, (args, kinds)  # the kinds met: a record
        if args[0] == "update-ref":  # its kind check reads the tag the hash covers: no kind is decoded
            assert kinds == {"hash"}, kinds
        assert "reelstore.storage.pack" in mods, args
        assert "reelstore.storage.pack_write" not in mods, args  # a read writes no pack
        assert "reelstore.storage.verb_log" not in mods, args  # no fork, commit or abort
        assert "reelstore.storage.reflog" not in mods, args  # a ref write appends its reflog line without the
        # reader's entry class
        assert ("reelstore.revisions" in mods) == (args[-1] == "main"), args  # a full id needs no revision parser


def test_fork_imports_the_kernel_but_nothing_it_does_not_run(tmp_path: Path) -> None:
    """fork needs the views and admission parts of the kernel (and status for --json); not the commit
    machinery (the rest of the kernel's verbs, the drain, adapters, hooks, the API), the namespace map (a
    fresh view changed nothing), sync, gc/fsck, `reel run`, dulwich, the credential store, the adapter
    entry points (importlib.metadata) or a subprocess (no hook runs)."""
    _imported_after("init", cwd=tmp_path)
    mods = _imported_after("fork", "v1", cwd=tmp_path)
    assert "reelstore.kernel.fork" in mods
    kernel = {m.rpartition(".")[2] for m in _loaded(mods, ("reelstore.kernel.",))}
    assert kernel <= {"admission", "fork", "names", "views"}, kernel  # its line comes from the view it wrote
    with_json = _imported_after("fork", "v2", "--json", cwd=tmp_path)  # the status document needs the status
    kernel = {m.rpartition(".")[2] for m in _loaded(with_json, ("reelstore.kernel.",))}
    assert {"inspection", "changes"} <= kernel <= {"admission", "changes", "fork", "inspection", "names", "views"}
    kinds = {m.rpartition(".")[2] for m in _loaded(mods, ("reelstore.objects.",))}
    assert kinds <= {"hash", "block", "capability", "record", "view"}, kinds  # no delta, effect or tree: none met
    assert _loaded(mods, KERNEL_AND_UP[1:] + ("reelstore.namespace", "reelstore.revisions",
                                              "reelstore.storage.secrets", "reelstore.storage.pack_write",
                                              "reelstore.storage.pack_verify", "reelstore.storage.reflog",
                                              "reelstore.storage.ref_locks", "reelstore.cli.terminal")) == []
    assert sorted(mods & (STDLIB_EXTRAS | {"importlib.metadata", "subprocess", "shutil"})) == []
    later = _imported_after("fork", "v3", cwd=tmp_path)  # the trunk's capability is stored now: one loose view
    assert _loaded(later, ("reelstore.storage.batch", "reelstore.storage.object_cache", "reelstore.storage.roll_up",
                           "reelstore.storage.pack_write")) == []


def test_push_with_nothing_to_send_loads_push_alone(tmp_path: Path) -> None:
    """`reel push` imports the push side of sync only: not fetch, abort or the receiving side's pack
    reader (dulwich's object store and pack), not the kernel's verbs, the drain or the API."""
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True, timeout=60)
    store = tmp_path / "store"
    store.mkdir()
    _imported_after("init", cwd=store)
    _imported_after("remote", "add", "origin", str(remote), cwd=store)
    _imported_after("push", cwd=store)
    mods = _imported_after("push", cwd=store)
    assert "reelstore.sync.push" in mods
    assert _loaded(mods, ("reelstore.sync.fetch", "reelstore.sync.abort", "reelstore.sync.incoming",
                          "reelstore.kernel.verbs", "reelstore.drain", "reelstore.api", "reelstore.adapters",
                          "reelstore.maintenance", "dulwich.object_store", "dulwich.pack", "dulwich.client")) == []


def test_the_sync_package_loads_on_use_and_its_names_stay_functions() -> None:
    """`reelstore.sync` imports a submodule on first use of a name; `push`, `fetch` and `abort` name
    functions even after their same-named submodules are imported (which binds a module on its package)."""
    script = ("import sys, importlib; from reelstore import sync; before = set(sys.modules); "
              "importlib.import_module('reelstore.sync.push'); importlib.import_module('reelstore.sync.abort'); "
              "from reelstore.sync import fetch; "
              "print(sorted(m for m in before if m.startswith('reelstore.sync.')), callable(sync.push), "
              "callable(sync.abort), callable(fetch), sync.push.__module__, sorted(sync.__all__) == "
              "sorted(n for n in sync.__all__ if hasattr(sync, n)))")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=60, text=True)
    assert out.stdout.split() == ["[]", "True", "True", "True", "reelstore.sync.push", "True"], out.stderr


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
        tmp_path: Path) -> None:
    """What a short verb allocates lives to the exit: the executable collects young objects every
    YOUNG_COLLECTION_EVERY allocations instead of every 700, so `cat-file -p` runs no collection at all
    (it ran seven). The click group run inside another program leaves the interpreter's threshold alone."""
    _imported_after("init", cwd=tmp_path)
    head = (tmp_path / ".reel" / "refs" / "heads" / "main").read_text()[:64]
    done = subprocess.run([sys.executable, "-c", _COLLECTIONS, "cat-file", "-p", head], capture_output=True,
                          timeout=60, cwd=tmp_path, check=True)
    default, embedded, after, every, collections = (int(n) for n in done.stdout.splitlines()[-1].split())
    assert embedded == default == 700
    assert after == every > default
    assert collections == 0
