"""`reel abort`: discard a view and its live descendants; none of their effects can ever fire."""

from __future__ import annotations

import click

from reelstore.api import Store
from reelstore.cli.context import Context, pass_ctx
from reelstore.kernel import binding
from reelstore.kernel.views import descendants, load_live


@click.command("abort")
@click.argument("view")
@pass_ctx
def abort(ctx: Context, view: str) -> None:
    """Abort VIEW (and its live descendants): refs deleted, no fire capability minted.

    A view bound to a remote has its copy there deleted first, so no other store can commit it;
    if the remote cannot be reached or its copy moved, nothing is aborted (E010 / E015).
    """
    live = load_live(ctx.repo, view)
    if any(binding.bound_remote(ctx.repo, v.view) for v in [*descendants(ctx.repo, live), live]):
        from reelstore import sync  # on use: it loads dulwich, which most commands never need

        names = sync.abort(ctx.repo, view)
    else:
        names = Store(ctx.repo).abort(view)
    ctx.emit({"aborted": names}, "\n".join(f"aborted view {n}" for n in names))


COMMANDS = [abort]
