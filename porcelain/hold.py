"""`reel hold`: stop all effect admission and draining until `reel release`."""

from __future__ import annotations

import click

from reelstore.cli.context import Context, pass_ctx
from reelstore.drain.hold import hold as put_on_hold


@click.command("hold")
@click.option("--why", required=True, help="Why the store is held (shown to everyone refused).")
@pass_ctx
def hold(ctx: Context, why: str) -> None:
    """Put the store on hold: effects are refused at admission and nothing drains (E012, exit 6)."""
    held = put_on_hold(ctx.repo, why, ctx.repo.principal())
    ctx.emit(held.to_json(), f"store held by {held.by}: {why}")


COMMANDS = [hold]
