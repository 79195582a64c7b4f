"""The foundation's acceptance examples, through the real installed `reel`."""

from __future__ import annotations

import re
from pathlib import Path


def test_hash_object_round_trip(reel):
    reel("init", check=True)
    out = reel("hash-object", "-w", "--stdin", input=b"hi\n", check=True).stdout.decode().strip()
    assert re.fullmatch(r"[0-9a-f]{64}", out)
    shown = reel("cat-file", "-p", out[:8], check=True)
    assert shown.stdout == b"hi\n"


def test_flipped_byte_in_loose_object_is_e007(reel, tmp_path: Path):
    reel("init", check=True)
    oid = reel("hash-object", "-w", "--stdin", input=b"payload\n", check=True).stdout.decode().strip()
    path = tmp_path / ".reel" / "objects" / oid[:2] / oid[2:]
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x40
    path.chmod(0o644)
    path.write_bytes(bytes(data))
    proc = reel("cat-file", "-p", oid)
    assert proc.returncode == 3
    assert proc.stderr.decode().startswith("error: E007:")
    assert b"payload" not in proc.stdout
