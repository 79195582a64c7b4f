"""`reel repack`: pack loose objects, or (with -a) every object into one pack; -d removes what it replaced."""

from __future__ import annotations

from dataclasses import asdict

import click

from reelstore.cli.context import Context, pass_ctx
from reelstore.cli.progress import progress_for, progress_options
from reelstore.maintenance.repack import repack as do_repack
from reelstore.wording import plural


@click.command("repack")
@click.option("-a", "all_objects", is_flag=True, help="Pack every object (loose and packed) into one new pack.")
@click.option("-d", "delete", is_flag=True, help="Then remove the loose copies and (with -a) the old packs.")
@progress_options
@pass_ctx
def repack(ctx: Context, all_objects: bool, delete: bool) -> None:
    """Pack objects. Unlike gc, repack never drops an object, reachable or not."""
    with progress_for(ctx) as progress:
        report = do_repack(
            ctx.repo, all_objects=all_objects, delete=delete, progress=progress.count if progress else None
        )
    doc = asdict(report)
    text = (
        (
            f"packed {plural(report.packed, 'object')} into {report.pack}; "
            f"removed {plural(report.packs_removed, 'pack')} and {plural(report.loose_removed, 'loose object')}"
        )
        if report.pack
        else "nothing to pack"
    )
    ctx.emit(doc, text)


COMMANDS = [repack]
