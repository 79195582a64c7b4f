"""The one progress module, in process: text cut anywhere is drawn whole, a stage's counter ends as a
`done.` line, a dumb terminal gets no escape codes, and the library's own counters and remote text
reach it as git shows them."""

from __future__ import annotations

import io
import re

import pytest

from reelstore.cli import progress as progress_mod
from reelstore.cli.progress import Progress
from reelstore.sync.transport import Counter, remote_progress, size

REMOTE = (
    "Enumerating objects: 5, done.\n"
    "Counting objects:  20% (1/5)\rCounting objects: 100% (5/5)\rCounting objects: 100% (5/5), done.\n"
    "Total 5 (delta 0), reused 0 (delta 0), pack-reused 0\n"
)


@pytest.fixture(autouse=True)
def no_redraw_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every in-place part is drawn, so what is drawn does not depend on the machine's speed."""
    monkeypatch.setattr(progress_mod, "REDRAW_S", 0.0)


def segments(out: str) -> list[str]:
    """What a person sees, part by part: the output cut at each `\\r`/`\\n`, escape codes dropped."""
    return [s.rstrip(" ") for s in re.split(r"[\r\n]", out.replace("\x1b[K", "")) if s.strip()]


def drawn(chunks: list[str], *, escapes: bool = True) -> str:
    out = io.StringIO()
    p = Progress(out, escapes=escapes)
    for chunk in chunks:
        p.text(chunk)
    p.end()
    return out.getvalue()


def test_text_cut_at_every_place_is_drawn_whole() -> None:
    whole = segments(drawn([REMOTE]))
    assert whole == [
        "Enumerating objects: 5, done.",
        "Counting objects:  20% (1/5)",
        "Counting objects: 100% (5/5)",
        "Counting objects: 100% (5/5), done.",
        "Total 5 (delta 0), reused 0 (delta 0), pack-reused 0",
    ]
    for cut in range(1, len(REMOTE)):
        assert segments(drawn([REMOTE[:cut], REMOTE[cut:]])) == whole, cut
    assert segments(drawn(list(REMOTE))) == whole  # one character at a time


def test_lines_stay_and_counters_redraw_in_place() -> None:
    out = drawn(["Counting objects: 1/2\r", "Counting objects: 2/2\r", "\n", "note: done\n"])
    assert out == "Counting objects: 1/2\rCounting objects: 2/2\x1b[K\rCounting objects: 2/2\x1b[K\nnote: done\n"


def test_text_left_without_its_line_end_is_drawn_at_the_end() -> None:
    assert drawn(["received 3 obj", "ects"]) == "received 3 objects\n"


def test_stage_counters_end_as_done_lines() -> None:
    out = io.StringIO()
    p = Progress(out, escapes=True)
    p.count("marking", 3)
    p.count("packing", 2, 5)
    p.count("packing", 5, 5)
    p.end()
    p.end()
    assert out.getvalue() == (
        "marking: 3\rmarking: 3, done.\x1b[K\npacking:  40% (2/5)\rpacking: 100% (5/5)\x1b[K"
        "\rpacking: 100% (5/5), done.\x1b[K\n"
    )


def test_a_dumb_terminal_gets_no_escape_codes() -> None:
    out = io.StringIO()
    p = Progress(out, escapes=False)
    p.count("packing", 999, 1000)
    p.count("packing", 1000, 1000)
    p.text("remote: a long line\rremote: x\r")
    p.end()
    text = out.getvalue()
    assert "\x1b" not in text
    # A shorter redraw is padded with spaces over what was there.
    assert "\rremote: x          \n" in text


def test_an_in_place_line_is_cut_to_the_terminal_width() -> None:
    out = io.StringIO()
    Progress(out, escapes=True, width=20).text("remote: Counting objects:  20% (1/5)\r")
    assert out.getvalue() == "remote: Counting ob"


def test_remote_text_is_marked_and_utf8_cut_between_chunks_is_whole() -> None:
    got: list[str] = []
    forward = remote_progress(got.append)
    assert forward is not None
    data = "Compressing é: 1/2\rCompressing é: 2/2, done.\nTotal 2\n".encode()
    cut = data.index("é".encode()) + 1  # inside the two bytes of é
    forward(data[:cut])
    forward(data[cut:])
    assert "".join(got) == ("remote: Compressing é: 1/2\rremote: Compressing é: 2/2, done.\nremote: Total 2\n")
    assert remote_progress(None) is None


def test_a_library_counter_reports_in_place_then_done() -> None:
    got: list[str] = []
    c = Counter(got.append, "writing objects", 4)
    c.REDRAW_S = 0.0
    for _ in range(4):
        c.add()
    c.done()
    assert got[0] == "writing objects:  25% (1/4)\r" and got[-1] == "writing objects: 100% (4/4), done.\n"
    sized = Counter(got.append, "receiving pack", unit=size)
    sized.add(3 << 20)
    sized.done()
    assert got[-1] == "receiving pack: 3.00 MiB, done.\n"
    assert [size(n) for n in (0, 1023, 1024, 1536, 5 << 30)] == [
        "0 bytes",
        "1023 bytes",
        "1.00 KiB",
        "1.50 KiB",
        "5.00 GiB",
    ]
