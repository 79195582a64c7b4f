"""`reel repack`: pack loose objects, or (with -a) every object into one pack; -d removes what it replaced."""

from __future__ import annotations

import sys
from collections.abc import Callable

import click

from reelstore.cli.context import Context, pass_ctx
from reelstore.maintenance.gc import repack as do_repack


def tty_progress() -> Callable[[str, int, int | None], None] | None:
    """A progress line on stderr, only when stderr is a terminal (never in pipes, logs or tests)."""
    if not sys.stderr.isatty():
        return None

    def show(stage: str, done: int, total: int | None) -> None:
        tail = f"{done}/{total}" if total else str(done)
        sys.stderr.write(f"\r{stage}: {tail}\x1b[K")
        sys.stderr.flush()

    return show


def end_progress(progress: object) -> None:
    if progress is not None:
        sys.stderr.write("\r\x1b[K")
        sys.stderr.flush()


@click.command("repack")
@click.option("-a", "all_objects", is_flag=True, help="Pack every object (loose and packed) into one new pack.")
@click.option("-d", "delete", is_flag=True, help="Then remove the loose copies and (with -a) the old packs.")
@pass_ctx
def repack(ctx: Context, all_objects: bool, delete: bool) -> None:
    """Pack objects. Unlike gc, repack never drops an object, reachable or not."""
    progress = tty_progress()
    report = do_repack(ctx.repo, all_objects=all_objects, delete=delete, progress=progress)
    end_progress(progress)
    doc = dict(report.__dict__)
    text = (f"packed {report.packed} objects into {report.pack}; removed {report.packs_removed} packs and "
            f"{report.loose_removed} loose objects") if report.pack else "nothing to pack"
    ctx.emit(doc, text)


COMMANDS = [repack]
