"""The one progress module: a counter redraws in place, text from a remote becomes lines, end clears."""

from __future__ import annotations

import os
import pty
import subprocess
import sys

import pytest

from reelstore.cli.progress import TtyProgress, tty_progress


def test_counter_redraws_and_end_clears(capsys: pytest.CaptureFixture[str]) -> None:
    p = TtyProgress()
    p.count("marking", 3)
    p.count("packing", 2, 5)
    p.end()
    p.end()
    assert capsys.readouterr().err == "\rmarking: 3\x1b[K\rpacking: 2/5\x1b[K\r\x1b[K"


def test_text_lines_and_in_place_counters(capsys: pytest.CaptureFixture[str]) -> None:
    p = TtyProgress()
    p.line("Counting objects: 10\r")
    p.line("done")
    p.end()
    assert capsys.readouterr().err == "Counting objects: 10\rdone\n"


def test_no_progress_unless_stderr_is_a_terminal() -> None:
    assert tty_progress() is None  # pytest captures stderr: not a terminal
    primary, secondary = pty.openpty()
    code = "from reelstore.cli.progress import tty_progress; print(type(tty_progress()).__name__)"
    out = subprocess.run([sys.executable, "-c", code], stderr=secondary, capture_output=False,
                         stdout=subprocess.PIPE, text=True, timeout=60, check=True).stdout
    os.close(primary)
    os.close(secondary)
    assert out.strip() == "TtyProgress"
