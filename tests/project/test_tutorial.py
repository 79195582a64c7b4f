"""docs/tutorial.md runs as written: every block it marks as tested is run, in order, and what each
command prints must be what the tutorial shows, ids, times and the directory normalised.

The marks (an HTML comment on the line right above a fenced block; the tutorial's source explains them
at its top, for whoever adds a section):

    <!-- tested: SESSION -->            a ```console block: its `$ ` lines run in SESSION
    <!-- tested: SESSION file NAME -->  a block whose text is written to NAME before SESSION runs

Each session runs in a fresh directory of its own, through `sh -c` per command line, with
REEL_PRINCIPAL=alice and this checkout's `reel` first on PATH. A line ending in ` &` starts in the
background (a service the session talks to) and is stopped when the session ends. A command's output
is its stdout and stderr as one stream, then `[exit N]` when N is not 0. Blocks without a mark are
not run (a prompt on a terminal, a section that needs what a test machine has not got).
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from conftest import REEL

TUTORIAL = Path(__file__).resolve().parents[2] / "docs" / "tutorial.md"
MARK = re.compile(r"<!-- tested: (?P<session>[\w.-]+)(?: file (?P<file>[\w./-]+))? -->")
DOC_PORT = "8765"
"""The port the tutorial's service listens on; the test gives it a reserved one and maps it back."""


@dataclass
class Session:
    name: str
    files: dict[str, str] = field(default_factory=dict)
    commands: list[tuple[str, list[str]]] = field(default_factory=list)
    """(command line, the lines the tutorial shows it printing), in order."""


def sessions(text: str) -> list[Session]:
    """The tutorial's tested blocks, grouped by session in order of first appearance."""
    found: dict[str, Session] = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        mark = MARK.fullmatch(lines[i].strip())
        if mark is None:
            i += 1
            continue
        assert i + 1 < len(lines) and lines[i + 1].startswith("```"), f"line {i + 1}: a mark must sit above a fence"
        end = lines.index("```", i + 2)
        body = lines[i + 2 : end]
        session = found.setdefault(mark["session"], Session(mark["session"]))
        if mark["file"]:
            session.files[mark["file"]] = "\n".join(body) + "\n"
        else:
            assert lines[i + 1] == "```console", f"line {i + 2}: a tested block without a file is a console block"
            for line in body:
                if line.startswith("$ "):
                    session.commands.append((line[2:], []))
                else:
                    assert session.commands, f"line {i + 3}: output before the first command"
                    session.commands[-1][1].append(line)
        i = end + 1
    return list(found.values())


HEX = re.compile(r"(?<![0-9a-f])[0-9a-f]{12,64}(?![0-9a-f])")
TIME = re.compile(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:\.\d+)?(?:Z| UTC)?")


def normalise(text: str) -> str:
    """`text` with ids, times and the session's directory (/tmp/NAME in the tutorial) masked."""
    text = re.sub(r"/tmp/[\w.-]+", "/tmp/DIR", text)
    return TIME.sub("<time>", HEX.sub("<id>", text))


def _wait_listening(port: int, proc: subprocess.Popen[bytes]) -> None:
    for _ in range(200):  # 10 s at most
        assert proc.poll() is None, "a background command of the tutorial exited"
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"nothing listened on 127.0.0.1:{port} 10 s after the background command started")


def run_session(session: Session, where: Path, port: int) -> list[tuple[str, str, str]]:
    """Run the session's commands; (command, what the tutorial shows, what it printed) per command.

    An id the tutorial shows a command printing stands, in later command lines, for the id this run
    printed in its place (`cat-file -e ID` of an effect queued earlier)."""
    where.mkdir()
    for name, body in session.files.items():
        (where / name).write_text(body.replace(DOC_PORT, str(port)))
    env = {k: v for k, v in os.environ.items() if not k.startswith("REEL_")}
    env.update(
        REEL_PRINCIPAL="alice",
        LC_ALL="C",
        TZ="UTC",
        HOME=str(where),
        NO_COLOR="1",
        PATH=f"{Path(REEL).parent}{os.pathsep}{env.get('PATH', '')}",
    )
    background: list[subprocess.Popen[bytes]] = []
    ids: dict[str, str] = {}
    out = []
    try:
        for command, shown in session.commands:
            line = HEX.sub(lambda m: ids.get(m[0], m[0]), command).replace(DOC_PORT, str(port))
            if line.endswith(" &"):
                background.append(
                    subprocess.Popen(
                        ["sh", "-c", "exec " + line[:-2]],
                        cwd=where,
                        env=env,
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                    )
                )
                _wait_listening(port, background[-1])
                out.append((command, "\n".join(shown), ""))  # it prints nothing the session sees
                continue
            done = subprocess.run(
                ["sh", "-c", line],
                cwd=where,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                timeout=120,
            )
            printed = done.stdout.decode("utf-8", "replace").replace(str(port), DOC_PORT).rstrip("\n")
            if done.returncode:
                printed += ("\n" if printed else "") + f"[exit {done.returncode}]"
            printed = printed.replace(str(where), "/tmp/" + session.name)
            expected = "\n".join(shown)
            if normalise(expected) == normalise(printed):
                ids.update(zip(HEX.findall(expected), HEX.findall(printed)))
            out.append((command, expected, printed))
    finally:
        for proc in background:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=10)
    return out


def test_the_tutorial_marks_its_sessions() -> None:
    found = {s.name: s for s in sessions(TUTORIAL.read_text())}
    assert {"store", "run"} <= set(found)
    assert sum(len(s.commands) for s in found.values()) >= 30
    assert set(found["run"].files) == {"inbox.py", "agent.py"}


@pytest.mark.parametrize("name", [s.name for s in sessions(TUTORIAL.read_text())])
def test_the_tutorial_prints_what_it_shows(name: str, tmp_path: Path, reserve_port: Callable[[], int]) -> None:
    (session,) = [s for s in sessions(TUTORIAL.read_text()) if s.name == name]
    ran = run_session(session, tmp_path / name, reserve_port())
    drift = [
        f"$ {command}\n--- the tutorial shows:\n{shown}\n--- it printed:\n{printed}"
        for command, shown, printed in ran
        if normalise(shown) != normalise(printed)
    ]
    assert not drift, "docs/tutorial.md has drifted:\n\n" + "\n\n".join(drift)


def test_normalising_keeps_what_differs() -> None:
    """The comparison would see a changed count or word: only ids, times and the directory are masked."""
    a = normalise("deleted 13; packed 13 into pack-1c6071722e0b776e at 2026-11-29 20:55:42 UTC in /tmp/tut")
    assert a == "deleted 13; packed 13 into pack-<id> at <time> in /tmp/DIR"
    assert normalise("1 effects") != normalise("1 effect") and normalise("exit 0") != normalise("exit 4")
