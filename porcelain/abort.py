"""`reel abort`: discard a view and its live descendants; none of their effects can ever fire."""

from __future__ import annotations

import click

from reelstore.cli.complete import VIEWS
from reelstore.cli.context import Context, pass_ctx
from reelstore.sync import verbs


@click.command("abort")
@click.argument("view", shell_complete=VIEWS)
@pass_ctx
def abort(ctx: Context, view: str) -> None:
    """Abort VIEW (and its live descendants): refs deleted, no fire capability minted.

    A view bound to a remote has its copy there deleted first, so no other store can commit it;
    if the remote cannot be reached or its copy moved, nothing is aborted (E010 / E015).
    """
    names = verbs.abort(ctx.repo, view)
    ctx.emit({"aborted": names}, "\n".join(f"aborted view {n}" for n in names))


COMMANDS = [abort]
