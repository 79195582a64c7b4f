"""Crafted bundles: a bundle may create only refs/heads/* (at records) and refs/views/*,
refs/snapshots/* (at views), and each object is exactly one zstd frame. Each is refused with E014
before any ref is created."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import blake3
import pytest
import zstandard
from conftest import REEL

from reelstore.api import Store
from reelstore.maintenance.bundle import END, MAGIC
from reelstore.objects import Hash


def reel(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "REEL_DIR"}
    return subprocess.run([REEL, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60)


def craft(path: Path, refs: dict[str, Hash], raws: list[bytes], extra_frame: bool = False) -> None:
    z = zstandard.ZstdCompressor(write_content_size=True)
    body = MAGIC + b"".join(f"{h.hex()} {name}\n".encode() for name, h in sorted(refs.items())) + b"\n"
    for raw in sorted(raws, key=lambda r: bytes(Hash.of(r))):
        frame = z.compress(raw) + (z.compress(b"more") if extra_frame else b"")
        body += bytes(Hash.of(raw)) + len(frame).to_bytes(4, "big") + frame
    body += END
    path.write_bytes(body + blake3.blake3(body).digest())


def blob(tmp_path: Path) -> tuple[Store, Hash, bytes]:
    store = Store.init(tmp_path / "s")
    view = store.fork("v")
    h = view.put("x", "hello")
    return store, h, store.repo.objects.get_raw(h)


@pytest.mark.parametrize(
    "name", ["refs/heads/z", "refs/drains/main", "refs/remotes/o/heads/main", "refs/tmp", "refs/views/w"]
)
def test_a_bundle_cannot_create_a_ref_outside_its_kinds(tmp_path: Path, name: str) -> None:
    store, h, raw = blob(tmp_path)
    craft(tmp_path / "f", {name: h}, [raw])
    out = reel(tmp_path / "s", "bundle", "unbundle", "--update-refs", str(tmp_path / "f"))
    assert out.returncode == 6 and "E014" in out.stderr and name in out.stderr, out.stderr
    assert store.repo.refs.get(name) is None
    assert reel(tmp_path / "s", "ops").returncode == 0


def test_an_object_of_two_zstd_frames_is_refused(tmp_path: Path) -> None:
    _, h, raw = blob(tmp_path)
    craft(tmp_path / "f", {"refs/snapshots/x": h}, [raw], extra_frame=True)
    out = reel(tmp_path / "s", "bundle", "verify", str(tmp_path / "f"))
    assert out.returncode == 6 and "exactly one zstd frame" in out.stderr, out.stderr
    craft(tmp_path / "g", {"refs/snapshots/x": h}, [raw])
    assert "exactly one" not in reel(tmp_path / "s", "bundle", "verify", str(tmp_path / "g")).stderr
