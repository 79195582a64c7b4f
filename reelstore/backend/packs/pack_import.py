"""Adding a pack that came from outside (`reel index-pack`): every entry inflated, re-hashed and decoded
before the pack gets an index, so a damaged pack is never read from."""

from __future__ import annotations

import mmap
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

from reelstore.backend.fileio import fsync_dir, temp_name, write_new
from reelstore.backend.packs.pack import scan_pack
from reelstore.backend.packs.pack_index import index_bytes
from reelstore.errors import BadInput, StorageError
from reelstore.objects import decode


def index_file(path: Path) -> tuple[bytes, bytes, int]:
    """(index bytes, trailer, entry count) of the pack at `path`, every entry checked (E007 if damaged);
    every object's mtime is now. The pack is read through a map, one entry at a time."""
    now = int(time.time())
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            raise StorageError("pack is truncated (empty)")
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            scan = scan_pack(data)
            rows = []
            for h, off, crc, raw in scan:
                try:
                    decode(raw)
                except BadInput as exc:
                    raise StorageError(
                        f"pack entry {h.hex()} at offset {off} does not decode: {exc.message}", id=h
                    ) from None
                rows.append((h, off, crc, now))
            return index_bytes(rows, scan.trailer), scan.trailer, len(rows)


def import_pack(pack_dir: Path, fill: Callable[[IO[bytes]], object]) -> tuple[Path, bytes, int]:
    """Spool what `fill` writes into `pack_dir`, durably, check and index it, and name it by its trailer:
    (pack path, trailer, count). A damaged pack leaves nothing behind."""
    pack_dir.mkdir(parents=True, exist_ok=True)
    tmp = temp_name(pack_dir / "stdin.pack")
    tmp_idx: Path | None = None
    try:
        with open(tmp, "xb") as f:
            fill(f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o444)
        idx, trailer, count = index_file(tmp)
        pack_path = pack_dir / f"pack-{trailer.hex()}.pack"
        # The index durable under its temporary name before the pack is renamed in, then the two renames
        # back to back, as every pack writer does: a reader that meets the pack without its index sees
        # a live writer's temporary index and waits; a crash between them leaves a dead writer's, repaired.
        tmp_idx = temp_name(pack_path.with_suffix(".idx"))
        write_new(tmp_idx, idx, mode=0o444)
        os.replace(tmp, pack_path)
        os.replace(tmp_idx, pack_path.with_suffix(".idx"))
    finally:
        tmp.unlink(missing_ok=True)
        if tmp_idx is not None:
            tmp_idx.unlink(missing_ok=True)
    fsync_dir(pack_dir)
    return pack_path, trailer, count
