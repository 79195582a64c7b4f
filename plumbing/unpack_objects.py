"""`reel unpack-objects`: explode a pack read from stdin into loose objects."""

from __future__ import annotations

import mmap
import tempfile

import click

from reelstore.backend.disk_store import on_disk
from reelstore.backend.packs.pack import scan_pack
from reelstore.cli.context import Context, pass_ctx
from reelstore.cli.stdin import spool_stdin
from reelstore.errors import StorageError
from reelstore.objects import Object, decode
from reelstore.wording import plural

BATCH_BYTES = 16 << 20


@click.command("unpack-objects")
@click.option("-n", "dry_run", is_flag=True, help="Verify the pack; write nothing.")
@click.option("-q", "quiet", is_flag=True, help="Print nothing on success.")
@pass_ctx
def unpack_objects(ctx: Context, dry_run: bool, quiet: bool) -> None:
    """Read a pack on stdin, verify all of it (trailer, every entry inflated, decoded and re-hashed),
    then store each object loose. A damaged pack stores nothing (exit 3). The pack is spooled to a
    temporary file and read one entry at a time, so memory does not follow its size or what its
    entries inflate to."""
    store = on_disk(ctx.repo.objects, "unpack-objects")
    with tempfile.TemporaryFile(dir=store.root) as spool:  # spooled on the store's own disk
        if spool_stdin(spool) == 0:
            raise StorageError("pack is truncated (stdin was empty)")
        spool.flush()
        with mmap.mmap(spool.fileno(), 0, access=mmap.ACCESS_READ) as data:
            scan = scan_pack(data)
            ids = [decode(raw).id.hex() for _, _, _, raw in scan]
            if not dry_run:
                batch: list[Object] = []
                held = 0
                for _, _, _, raw in scan:
                    batch.append(decode(raw))
                    held += len(raw)
                    if held >= BATCH_BYTES:
                        store.loose.put_many(batch)
                        batch, held = [], 0
                store.loose.put_many(batch)
    doc = {"count": len(ids), "ids": ids, "dry_run": dry_run}
    ctx.emit(doc, None if quiet else f"{'verified' if dry_run else 'unpacked'} {plural(len(ids), 'object')}")


COMMANDS = [unpack_objects]
