"""`reel index-pack`: verify a pack entry by entry and write its index."""

from __future__ import annotations

import mmap
import os
import time
from pathlib import Path

import click

from reelstore.cli.context import Context, pass_ctx
from reelstore.cli.stdin import spool_stdin
from reelstore.errors import BadInput, StorageError, input_error
from reelstore.objects import decode
from reelstore.storage.disk_store import DiskObjectStore
from reelstore.storage.fileio import atomic_write, fsync_dir, temp_name
from reelstore.storage.pack import scan_pack
from reelstore.storage.pack_index import index_bytes


@click.command("index-pack")
@click.option("--stdin", "from_stdin", is_flag=True, help="Read the pack from stdin and store it in objects/pack.")
@click.argument("pack", required=False, type=click.Path())
@pass_ctx
def index_pack(ctx: Context, from_stdin: bool, pack: str | None) -> None:
    """Inflate, re-hash and decode every entry of PACK (as unpack-objects does), check its trailer, and
    write PACK's .idx beside it (every object's mtime is now). Exit 3 if anything is damaged; then no
    index is written. The pack is read through a map, one entry at a time."""
    if from_stdin == (pack is not None):
        raise click.UsageError("give either a PACK file or --stdin")
    if not from_stdin:
        pack_path = Path(pack)  # type: ignore[arg-type]
        try:
            with open(pack_path, "rb"):
                pass
        except OSError as exc:
            raise input_error(exc, pack_path) from None
        idx, trailer, count = _index(pack_path)
        atomic_write(pack_path.with_suffix(".idx"), idx)
    else:
        store = ctx.repo.objects
        if not isinstance(store, DiskObjectStore):
            raise BadInput("index-pack --stdin needs an on-disk store")
        store.pack_dir.mkdir(parents=True, exist_ok=True)
        tmp = temp_name(store.pack_dir / "stdin.pack")
        try:
            with open(tmp, "xb") as f:
                spool_stdin(f)
                f.flush()
                os.fsync(f.fileno())
            os.chmod(tmp, 0o444)
            idx, trailer, count = _index(tmp)
            pack_path = store.pack_dir / f"pack-{trailer.hex()}.pack"
            os.replace(tmp, pack_path)
        finally:
            tmp.unlink(missing_ok=True)
        fsync_dir(store.pack_dir)
        atomic_write(pack_path.with_suffix(".idx"), idx, mode=0o444)
        store.refresh(force=True)
    ctx.emit({"pack": str(pack_path), "checksum": trailer.hex(), "count": count}, trailer.hex())


def _index(path: Path) -> tuple[bytes, bytes, int]:
    """(index bytes, trailer, entry count) of the pack at `path`, every entry checked."""
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
                    raise StorageError(f"pack entry {h.hex()} at offset {off} does not decode: {exc.message}",
                                       id=h) from None
                rows.append((h, off, crc, now))
            return index_bytes(rows, scan.trailer), scan.trailer, len(rows)


COMMANDS = [index_pack]
