"""The one-fsync journal append (a frame of the trunk's segment, then the drain ref without an fsync):
a real `reel commit` SIGKILLed after the frame is durable, before and after the ref follows, loses and
doubles nothing once `reel recover` has run, the ref catches up with the segment, and fsck is clean.
A damaged frame before the segment's tail is reported by fsck and refuses further appends."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from conftest import REEL
from target import TIERS, Target, configure, pay_op

from reelstore.api import Store
from reelstore.backend.repo import Repo
from reelstore.drain import journal as drainlog
from reelstore.errors import StorageError

POINTS = ("journal:object-written", "journal:ref-moved")


def reel(cwd: Path, *args: str, crash: str | None = None) -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if k not in ("REEL_DIR", "REEL_TEST_CRASH_AT")}
    if crash:
        env["REEL_TEST_CRASH_AT"] = crash
    return subprocess.run([REEL, *args], cwd=cwd, env=env, capture_output=True, timeout=60)


@pytest.mark.parametrize("tier", TIERS)
@pytest.mark.parametrize("point", POINTS)
def test_killed_journal_append_loses_and_doubles_nothing(tmp_path: Path, point: str, tier: str) -> None:
    with Target(tmp_path / "ledger.jsonl") as target:
        store = Store.init(tmp_path)
        configure(store.repo.config, target.url)
        store.fork("pay").effect("http", pay_op(target.url, tier))
        killed = reel(tmp_path, "commit", "pay", crash=point)
        assert killed.returncode == -9, killed.stderr.decode()
        assert target.count("/") == 0, "the intent was durable before anything was sent"
        rec = reel(tmp_path, "recover")
        repo = Repo.open(tmp_path)
        (latest,) = drainlog.index(repo, "main").latest.values()
        if tier == "blind":
            assert target.count("/") == 0 and rec.returncode == 7 and latest.state == "unknown"
        else:
            assert target.count("/") == 1 and rec.returncode == 0, rec.stderr.decode()
            assert latest.state == "succeeded"
        assert repo.refs["refs/drains/main"] == drainlog.head_of(repo, "main")
        fsck = reel(tmp_path, "fsck")
        assert fsck.returncode == 0, fsck.stdout.decode() + fsck.stderr.decode()


def test_damage_before_the_segment_tail_is_reported_and_blocks_appends(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    store = Store.init(tmp_path)
    for i in range(2):
        with store.view(f"v{i}") as v:
            v.effect("fs", {"action": "write", "path": f"out/{i}.txt", "content": "x"})
    seg = tmp_path / ".reel" / "objects" / "journal" / "main.seg"
    data = bytearray(seg.read_bytes())
    data[40] ^= 0x01
    seg.write_bytes(bytes(data))
    fsck = reel(tmp_path, "fsck")
    assert fsck.returncode == 3 and b"main.seg: frame at offset 0 fails its checksum" in fsck.stdout
    fresh = Store.open(tmp_path)
    fresh.fork("v2").effect("fs", {"action": "write", "path": "out/2.txt", "content": "x"})
    with pytest.raises(StorageError, match="main.seg"):
        fresh.commit("v2")
    assert not (tmp_path / "out" / "2.txt").exists(), "an effect was sent without a durable intent"
    assert seg.read_bytes() == bytes(data), "a damaged segment was appended to"


def test_torn_tail_frame_is_cut_off_and_the_journal_goes_on(tmp_path: Path) -> None:
    """What a power cut leaves of an append whose fsync never returned (half a frame, or zeros) is
    skipped by readers and cut off by the next append; a flipped byte in the last frame is damage."""
    (tmp_path / "out").mkdir()
    store = Store.init(tmp_path)
    with store.view("v0") as v:
        v.effect("fs", {"action": "write", "path": "out/0.txt", "content": "x"})
    seg = tmp_path / ".reel" / "objects" / "journal" / "main.seg"
    whole = seg.read_bytes()
    for name, tear in (("v1", lambda b: b + b[:30]), ("v2", lambda b: b + bytes(300))):
        seg.write_bytes(tear(whole))
        fresh = Store.open(tmp_path)
        head = drainlog.head_of(fresh.repo, "main")
        assert head == drainlog.head_of(Repo.open(tmp_path), "main")
        assert reel(tmp_path, "fsck").returncode == 0
        with fresh.view(name) as v:
            v.effect("fs", {"action": "write", "path": f"out/{name}.txt", "content": "y"})
        assert v.result is not None and v.result.drain is not None and v.result.drain.complete
        assert seg.read_bytes().startswith(whole) and len(seg.read_bytes()) > len(whole)
        whole = seg.read_bytes()
    flipped = bytearray(whole)
    flipped[-3] ^= 0x01
    seg.write_bytes(bytes(flipped))
    assert reel(tmp_path, "fsck").returncode == 3
