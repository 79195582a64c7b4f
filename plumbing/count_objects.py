"""`reel count-objects`: how many objects are loose and packed, and how much room they take."""

from __future__ import annotations

import click

from reelstore.backend.disk_store import on_disk
from reelstore.cli.context import Context, pass_ctx


@click.command("count-objects")
@click.option("-v", "verbose", is_flag=True, help="Every figure, one per line, as git's count-objects -v.")
@pass_ctx
def count_objects(ctx: Context, verbose: bool) -> None:
    """Count loose objects and their KiB; with -v also in-pack, packs, size-pack, prune-packable, garbage."""
    stats = on_disk(ctx.repo.objects, "count-objects").counts()
    if verbose:
        text = "\n".join(f"{k}: {v}" for k, v in stats.items())
    else:
        text = f"{stats['count']} objects, {stats['size']} kilobytes"
    ctx.emit(stats, text)


COMMANDS = [count_objects]
