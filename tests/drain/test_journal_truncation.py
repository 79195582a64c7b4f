"""A journal segment that lost fsynced frames (a partial copy or restore of a live store, a disk that
ignored fsync) is refused, never read as "not sent yet": `reel recover` exits 3 (E007) and says how
to restore, and the blind effects already delivered are not sent again. The target's ledger is the
oracle; without the checks, a cut that takes a whole drain away (2, 4) makes `recover` send that
record's blind effect a second time, and one that takes an outcome (5) leaves it unknown (exit 7)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import REEL
from target import Target

from reelstore.api import Store
from reelstore.backend.segment import FRAME


def reel(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("REEL_DIR", "REEL_TEST_CRASH_AT")}
    return subprocess.run([REEL, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60)


def frame_ends(seg: Path) -> list[int]:
    data, pos, ends = seg.read_bytes(), 0, []
    while pos < len(data):
        _, length, _, _ = FRAME.unpack_from(data, pos)
        pos += FRAME.size + length
        ends.append(pos)
    return ends


def drained(tmp_path: Path, target: Target) -> tuple[Path, Path]:
    """A store that committed three records of one blind effect each, all sent; (its segment, the store)."""
    store = Store.init(tmp_path / "s")
    for n in range(3):
        view = store.fork(f"pay-{n}")
        view.effect("http", {"method": "POST", "url": f"{target.url}/blind/pay", "json": {"n": n}})
        view.commit()
    assert target.count("/blind") == 3
    seg = tmp_path / "s" / ".reel" / "objects" / "journal" / "main.seg"
    assert len(frame_ends(seg)) == 6  # per record: the intent, then the outcome
    return seg, tmp_path / "s"


@pytest.mark.parametrize("cut", [2, 4, 5])
@pytest.mark.parametrize("lost", ["segment tail", "segment tail and its mark"])
def test_recover_refuses_a_segment_that_lost_fsynced_frames(tmp_path: Path, cut: int, lost: str) -> None:
    with Target(tmp_path / "ledger.jsonl") as target:
        seg, store = drained(tmp_path, target)
        os.truncate(seg, frame_ends(seg)[cut - 1])
        if lost == "segment tail and its mark":
            (seg.parent / "main.seg.hwm").unlink()  # only the drain ref still knows
        out = reel(store, "recover")
        assert out.returncode == 3 and "E007" in out.stderr, out.stderr
        assert "lost" in out.stderr and ".reel/objects/journal/" in out.stderr
        assert target.count("/blind") == 3
        assert reel(store, "fsck").returncode == 3


def test_the_mark_alone_catches_a_lost_tail_when_the_drain_ref_lags(tmp_path: Path) -> None:
    """The drain ref restored from an older copy too: the high-water mark still says what was written."""
    with Target(tmp_path / "ledger.jsonl") as target:
        seg, store = drained(tmp_path, target)
        os.truncate(seg, frame_ends(seg)[0])
        first = Store.open(store).repo.objects.segment("main")
        assert first is not None
        first.refresh()
        assert first.problem is not None
        shutil.copy(seg, tmp_path / "kept.seg")
        subprocess.run([REEL, "update-ref", "refs/drains/main", first.order[0].hex()], cwd=store, check=False)
        out = reel(store, "recover")
        assert out.returncode == 3 and "high-water mark" in out.stderr, out.stderr
        assert target.count("/blind") == 3


def test_an_intact_journal_recovers_as_before(tmp_path: Path) -> None:
    with Target(tmp_path / "ledger.jsonl") as target:
        _, store = drained(tmp_path, target)
        out = reel(store, "recover", "--json")
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout) is not None
        assert target.count("/blind") == 3


def test_an_epoch_that_went_backwards_is_refused_before_anything_is_sent(tmp_path: Path) -> None:
    with Target(tmp_path / "ledger.jsonl") as target:
        _, store = drained(tmp_path, target)
        assert reel(store, "recover").returncode == 0
        assert reel(store, "recover").returncode == 0  # epoch 2 now; the journal holds nothing of it yet
        s = Store.open(store)
        view = s.fork("late")
        view.effect("http", {"method": "POST", "url": f"{target.url}/blind/pay", "json": {"n": 9}})
        view.commit()
        assert target.count("/blind") == 4
        (store / ".reel" / "epoch").write_text("1\n")
        again = Store.open(store).fork("later")
        again.effect("http", {"method": "POST", "url": f"{target.url}/blind/pay", "json": {"n": 10}})
        out = reel(store, "commit", "later")
        assert out.returncode == 3 and "epoch went backwards" in out.stderr, out.stderr
        assert target.count("/blind") == 4
