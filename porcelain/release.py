"""`reel release`: lift the store's hold."""

from __future__ import annotations

import click

from reelstore.cli.context import Context, pass_ctx
from reelstore.drain.hold import release as lift


@click.command("release")
@pass_ctx
def release(ctx: Context) -> None:
    """Lift the hold. Effects that were pending stay pending: `reel recover` drains them."""
    held = lift(ctx.repo)
    ctx.emit({"released": held.to_json() if held else None}, "hold released" if held else "the store was not held")


COMMANDS = [release]
