"""Shell completion through click's machinery, as real subprocesses against a real store: the view,
trunk, ref, remote, snapshot and operation names offered; nothing (and no traceback) outside a store
or in a broken one; command names from the index alone; the bash script sourced in a real bash."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REEL
from gitserver import bare

from reelstore.cli.command_index import COMMANDS


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "REEL_DIR"}
    env.update(extra)
    return env


def complete(line: str, cwd: Path, shell: str = "bash") -> list[tuple[str, str]]:
    """(value, description) pairs `reel` offers for the last word of `line` (empty after a space)."""
    words = line.split()
    incomplete = "" if line.endswith(" ") else words[-1]
    cword = len(words) if line.endswith(" ") else len(words) - 1
    # fish passes the line up to the cursor and the incomplete word itself
    cword_value = incomplete if shell == "fish" else str(cword)
    done = subprocess.run(
        [REEL],
        cwd=cwd,
        capture_output=True,
        timeout=60,
        env=_env(_REEL_COMPLETE=f"{shell}_complete", COMP_WORDS=line, COMP_CWORD=cword_value),
    )
    assert done.returncode == 0 and done.stderr == b"", (line, done.stderr.decode())
    out = done.stdout.decode()
    if shell == "zsh":  # triples of lines: type, value, description ("_" for none)
        lines = out.splitlines()
        return [(lines[i + 1], "" if lines[i + 2] == "_" else lines[i + 2]) for i in range(0, len(lines), 3)]
    pairs = []
    for row in filter(None, out.splitlines()):  # with nothing to offer, fish's format is one empty line
        kind, _, rest = row.partition(",")
        assert kind == "plain", row
        value, _, help = rest.partition("\t")
        pairs.append((value, help))
    return pairs


def names(line: str, cwd: Path, shell: str = "bash") -> list[str]:
    return [value for value, _ in complete(line, cwd, shell)]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store with views, two trunks, a tag, a snapshot, two remotes and one drained operation."""
    root = tmp_path_factory.mktemp("complete")

    def reel(*args: str, input: bytes | None = None) -> str:
        done = subprocess.run([REEL, *args], cwd=root / "s", input=input, capture_output=True, timeout=120, env=_env())
        assert done.returncode == 0, (args, done.stderr.decode())
        return done.stdout.decode()

    subprocess.run([REEL, "init", "s"], cwd=root, check=True, capture_output=True, timeout=120, env=_env())
    reel("fork", "fx")
    reel(
        "effect", "fx", "--adapter", "fs", "--op", json.dumps({"action": "write", "path": "out/a.txt", "content": "a"})
    )
    reel("commit", "fx")
    for view in ("agent", "agent-2", "topic"):
        reel("fork", view)
    reel("update-ref", "refs/heads/dev", "main")
    reel("update-ref", "refs/tags/v1", "main")
    reel("snapshot", "topic", "snap1")
    reel("remote", "add", "origin", str(bare(root / "o.git")))
    reel("remote", "add", "backup", str(bare(root / "b.git")))
    return root / "s"


def _op(store: Path) -> str:
    done = subprocess.run([REEL, "--json", "ops"], cwd=store, capture_output=True, timeout=60, env=_env(), check=True)
    doc = json.loads(done.stdout)
    ops = doc["operations"] if isinstance(doc, dict) else doc
    assert len(ops) == 1
    return str(ops[0]["op"])


def test_commands_and_options_from_the_index(store: Path) -> None:
    assert names("reel re", store) == sorted(n for n in COMMANDS if n.startswith("re"))
    offered = dict(complete("reel comm", store, "zsh"))
    assert list(offered) == ["commit"] and offered["commit"].startswith("Commit")
    assert "--max-count" in names("reel log --m", store)
    assert names("reel remote ", store) == ["add", "get-url", "list", "remove", "rename"]


def test_view_trunk_ref_remote_snapshot_and_op_names(store: Path) -> None:
    views = ["agent", "agent-2", "topic"]
    assert names("reel commit ", store) == views
    assert names("reel commit ag", store) == ["agent", "agent-2"]
    assert names("reel abort t", store) == ["topic"]
    assert names("reel put agent-", store) == ["agent-2"]
    assert names("reel views --unbind a", store) == ["agent", "agent-2"]
    assert names("reel fork new --from ", store) == ["dev", "main", *views]
    assert names("reel fork new --from refs/h", store) == ["refs/heads/dev", "refs/heads/main"]
    assert names("reel ls ", store) == ["dev", "main", *views]
    assert names("reel log ", store) == ["dev", "main", *views, "v1", "snap1"]
    assert names("reel log main..d", store) == ["main..dev"]
    assert names("reel log main...t", store) == ["main...topic"]
    assert names("reel show ^ma", store) == ["^main"]
    assert names("reel cat-file -p refs/t", store) == ["refs/tags/v1"]
    assert names("reel for-each-ref refs/h", store) == ["refs/heads/dev", "refs/heads/main"]
    assert names("reel push ", store) == ["origin", "backup"]
    assert names("reel push origin ma", store) == ["main"]
    assert names("reel fetch b", store) == ["backup"]
    assert names("reel commit agent --remote o", store) == ["origin"]
    assert names("reel remote rename ", store) == ["origin", "backup"]
    assert names("reel remote get-url b", store) == ["backup"]
    assert names("reel remote add --track x y --trunk ", store) == ["dev", "main"]
    assert names("reel restore ", store) == ["snap1"]
    assert names("reel restore snap1 --as t", store) == ["topic"]
    assert names("reel snapshot -d s", store) == ["snap1"]
    op = _op(store)
    assert names("reel ops show ", store) == [op]
    assert names("reel reconcile op_", store) == [op]
    assert names(f"reel ops show {op[3:7]}", store) == [op[3:]], "an op id is taken without its op_ too"
    assert names("reel effect agent --adapter fs --op {} --supersedes ", store) == [op]


def test_zsh_and_fish_carry_descriptions(store: Path) -> None:
    assert complete("reel commit ", store, "zsh") == [("agent", "view"), ("agent-2", "view"), ("topic", "view")]
    remotes = dict(complete("reel push ", store, "zsh"))
    assert remotes == {"origin": str(store.parent / "o.git"), "backup": str(store.parent / "b.git")}
    assert complete("reel fork n --from d", store, "fish") == [("dev", "trunk")]
    op = _op(store)
    assert complete("reel ops show op", store, "fish") == [(op, "succeeded fs:out/a.txt")]


def test_minus_c_names_the_store(store: Path, tmp_path: Path) -> None:
    assert names(f"reel -C {store} commit ", tmp_path) == ["agent", "agent-2", "topic"]


def test_nothing_and_no_traceback_outside_a_store_or_in_a_broken_one(store: Path, tmp_path: Path) -> None:
    for line in ("reel commit ", "reel push ", "reel ops show ", "reel log main..", "reel restore "):
        assert names(line, tmp_path) == [], line  # complete() asserts exit 0 and an empty stderr
    broken = tmp_path / "broken"
    shutil.copytree(store, broken)
    assert names("reel commit ", broken) == ["agent", "agent-2", "topic"]
    # A ref no operation wrote (recovery at open redoes a logged ref, so damage one the log never named).
    (broken / ".reel" / "refs" / "views" / "stray").write_bytes(b"not a ref\n")  # reel says E007 for it
    for line in ("reel commit ", "reel log ", "reel show ma"):
        assert names(line, broken) == [], line
    assert names("reel ops show ", broken) == [_op(store)], "operations do not read the damaged view ref"
    (broken / ".reel" / "config").write_bytes(b"[core]\n\ttrunk = ma\xffin\n")
    for line in ("reel commit ", "reel push ", "reel ops show ", "reel remote rename "):
        assert names(line, broken) == [], line
    assert names("reel comm", broken) == ["commit"], "command names need no store"


def _imported(cwd: Path, line: str) -> set[str]:
    words = line.split()
    code = (
        "import sys\nfrom reelstore.cli.main import main\ntry:\n    main([])\nexcept SystemExit:\n    pass\n"
        "sys.stderr.write('\\n'.join(sorted(sys.modules)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=cwd,
        capture_output=True,
        timeout=60,
        check=True,
        env=_env(
            _REEL_COMPLETE="bash_complete",
            COMP_WORDS=line,
            COMP_CWORD=str(len(words) if line.endswith(" ") else len(words) - 1),
        ),
    )
    assert done.stdout, line
    return set(done.stderr.decode().split())


def test_completion_loads_only_the_command_it_completes(store: Path) -> None:
    def commands(mods: set[str]) -> set[str]:
        return {m for m in mods if m.startswith(("reelstore.plumbing.", "reelstore.porcelain."))}

    assert commands(_imported(store, "reel co")) == set()
    assert commands(_imported(store, "reel commit ")) == {"reelstore.porcelain.commit"}
    assert commands(_imported(store, "reel remote rename ")) == {"reelstore.porcelain.remote"}


def test_the_bash_script_completes_in_a_real_bash(store: Path, tmp_path: Path) -> None:
    bash = shutil.which("bash")
    assert bash, "bash is needed to test the bash completion script (CI runs .ci/run with bash)"
    source = subprocess.run(
        [REEL], capture_output=True, timeout=60, check=True, env=_env(_REEL_COMPLETE="bash_source")
    ).stdout.decode()
    script = tmp_path / "reel-complete.bash"
    script.write_text(source)
    probe = (
        f"source {script}\n"
        "complete -p reel\n"
        "COMP_WORDS=(reel commit ag); COMP_CWORD=2; COMPREPLY=()\n"
        f"_reel_completion {REEL}\n"
        'printf "<%s>\\n" "${COMPREPLY[@]}"\n'
        'COMP_WORDS=(reel push ""); COMP_CWORD=2; COMPREPLY=()\n'
        f"_reel_completion {REEL}\n"
        'printf "<%s>\\n" "${COMPREPLY[@]}"\n'
    )
    done = subprocess.run(
        [bash, "--norc", "--noprofile", "-c", probe], cwd=store, capture_output=True, timeout=60, env=_env()
    )
    assert done.returncode == 0, done.stderr.decode()
    lines = done.stdout.decode().splitlines()
    assert lines[0] == "complete -o nosort -F _reel_completion reel"
    assert lines[1:] == ["<agent>", "<agent-2>", "<origin>", "<backup>"]


def _shell(name: str) -> str:
    """The shell's path. Missing, the test fails (never skips), so a run without it cannot pass silently."""
    found = shutil.which(name)
    assert found, (
        f"{name} is not installed, and this test runs reel's completion script in a real {name}: "
        f"install it (Debian: `apt-get install {name}`; .ci/run does), see the README's test requirements"
    )
    return found


def test_the_fish_line_completes_in_a_real_fish(store: Path) -> None:
    fish = _shell("fish")
    probe = (
        "_REEL_COMPLETE=fish_source reel | source\n"  # the line docs/completion.md gives
        'complete -C "reel commit ag"\ncomplete -C "reel log main..d"\n'
    )
    done = subprocess.run(
        [fish, "--no-config", "-c", probe],
        cwd=store,
        capture_output=True,
        timeout=60,
        env=_env(PATH=f"{Path(REEL).parent}:{os.environ.get('PATH', '')}"),
    )
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode().splitlines() == ["agent\tview", "agent-2\tview", "main..dev\ttrunk"]


ZSH_PROBE = r"""
zmodload zsh/zpty
zpty z zsh -f -i
zpty -w z 'PS1="%% "; autoload -Uz compinit; compinit -u -D'
zpty -w z 'eval "$(_REEL_COMPLETE=zsh_source reel)"; print -r -- comps=${_comps[reel]}'
zpty -w -n z $'reel push \t'
buf=""
for i in {1..300}; do
  while zpty -r -t z line; do buf+="$line"; done
  [[ $buf == *"o.git"*"b.git"* || $buf == *"b.git"*"o.git"* ]] && break
  sleep 0.1
done
zpty -d z
print -r -- "$buf"
"""


def test_the_zsh_line_completes_in_a_real_zsh(store: Path) -> None:
    """zsh completes only in an interactive line editor: drive one through zsh's own pseudo-terminal."""
    zsh = _shell("zsh")
    done = subprocess.run(
        [zsh, "-f", "-c", ZSH_PROBE],
        cwd=store,
        capture_output=True,
        timeout=60,
        env=_env(PATH=f"{Path(REEL).parent}:{os.environ.get('PATH', '')}", TERM="dumb"),
    )
    assert done.returncode == 0, done.stderr.decode()
    out = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]|\r", "", done.stdout.decode())
    assert "comps=_reel_completion" in out  # the eval line registered reel's completion function
    for name, url in (("origin", store.parent / "o.git"), ("backup", store.parent / "b.git")):
        assert re.search(rf"\b{name}\s+--\s+{re.escape(str(url))}", out), out
