"""`reel index-pack`: verify a pack entry by entry and write its index."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click

from reelstore.cli.context import Context, pass_ctx
from reelstore.errors import BadInput, StorageError
from reelstore.objects import decode
from reelstore.storage.disk_store import DiskObjectStore
from reelstore.storage.fileio import atomic_write
from reelstore.storage.pack import scan_pack
from reelstore.storage.pack_index import index_bytes


@click.command("index-pack")
@click.option("--stdin", "from_stdin", is_flag=True, help="Read the pack from stdin and store it in objects/pack.")
@click.argument("pack", required=False, type=click.Path(exists=True, dir_okay=False))
@pass_ctx
def index_pack(ctx: Context, from_stdin: bool, pack: str | None) -> None:
    """Inflate, re-hash and decode every entry of PACK (as unpack-objects does), check its trailer, and
    write PACK's .idx beside it (every object's mtime is now). Exit 3 if anything is damaged; then no index
    is written."""
    if from_stdin == (pack is not None):
        raise click.UsageError("give either a PACK file or --stdin")
    data = sys.stdin.buffer.read() if from_stdin else Path(pack).read_bytes()  # type: ignore[arg-type]
    rows, trailer = scan_pack(data)
    for h, offset, _, raw in rows:
        try:
            decode(raw)
        except BadInput as exc:
            raise StorageError(f"pack entry {h.hex()} at offset {offset} does not decode: {exc.message}",
                               id=h) from None
    now = int(time.time())
    idx = index_bytes([(h, off, crc, now) for h, off, crc, _ in rows], trailer)
    name = f"pack-{trailer.hex()}"
    if from_stdin:
        store = ctx.repo.objects
        if not isinstance(store, DiskObjectStore):
            raise BadInput("index-pack --stdin needs an on-disk store")
        store.pack_dir.mkdir(parents=True, exist_ok=True)
        pack_path = store.pack_dir / f"{name}.pack"
        atomic_write(pack_path, data, mode=0o444)
        atomic_write(pack_path.with_suffix(".idx"), idx, mode=0o444)
        store.refresh(force=True)
    else:
        pack_path = Path(pack)  # type: ignore[arg-type]
        atomic_write(pack_path.with_suffix(".idx"), idx)
    ctx.emit({"pack": str(pack_path), "checksum": trailer.hex(), "count": len(rows)}, trailer.hex())


COMMANDS = [index_pack]
