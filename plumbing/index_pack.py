"""`reel index-pack`: verify a pack entry by entry and write its index."""

from __future__ import annotations

from pathlib import Path

import click

from reelstore.backend.disk_store import on_disk
from reelstore.backend.fileio import atomic_write
from reelstore.backend.packs.pack_import import index_file
from reelstore.cli.context import Context, pass_ctx
from reelstore.cli.stdin import spool_stdin
from reelstore.errors import input_error


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
    if pack is not None:
        pack_path = Path(pack)
        try:
            with open(pack_path, "rb"):
                pass
        except OSError as exc:
            raise input_error(exc, pack_path) from None
        idx, trailer, count = index_file(pack_path)
        atomic_write(pack_path.with_suffix(".idx"), idx)
    else:
        pack_path, trailer, count = on_disk(ctx.repo.objects, "index-pack --stdin").import_pack(spool_stdin)
    ctx.emit({"pack": str(pack_path), "checksum": trailer.hex(), "count": count}, trailer.hex())


COMMANDS = [index_pack]
