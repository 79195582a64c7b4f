"""`reel unpack-objects`: explode a pack read from stdin into loose objects."""

from __future__ import annotations

import sys

import click

from reelstore.cli.context import Context, pass_ctx
from reelstore.objects import decode
from reelstore.storage.disk_store import DiskObjectStore
from reelstore.storage.pack import scan_pack


@click.command("unpack-objects")
@click.option("-n", "dry_run", is_flag=True, help="Verify the pack; write nothing.")
@click.option("-q", "quiet", is_flag=True, help="Print nothing on success.")
@pass_ctx
def unpack_objects(ctx: Context, dry_run: bool, quiet: bool) -> None:
    """Read a pack on stdin, verify all of it (trailer, every entry inflated, decoded and re-hashed),
    then store each object loose. A damaged pack stores nothing (exit 3)."""
    rows, _ = scan_pack(sys.stdin.buffer.read())
    objs = [decode(raw) for *_, raw in rows]
    if not dry_run:
        store = ctx.repo.objects
        target = store.loose if isinstance(store, DiskObjectStore) else store
        target.put_many(objs)
    doc = {"count": len(objs), "ids": [o.id.hex() for o in objs], "dry_run": dry_run}
    ctx.emit(doc, None if quiet else f"{'verified' if dry_run else 'unpacked'} {len(objs)} objects")


COMMANDS = [unpack_objects]
