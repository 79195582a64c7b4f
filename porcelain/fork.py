"""`reel fork`: start a view over a trunk or another view (through the kernel's fork alone: the API's
Store would import the commit machinery too)."""

from __future__ import annotations

import click

from reelstore.cli.complete import SOURCES
from reelstore.cli.context import Context, pass_ctx
from reelstore.kernel.fork import fork as kernel_fork
from reelstore.kernel.inspection import status
from reelstore.objects import Capability


@click.command("fork")
@click.option("--from", "source", metavar="SOURCE", shell_complete=SOURCES,
              help="Trunk or view to fork (default: the store's trunk).")
@click.option("--cap", "caps", multiple=True, metavar="SPEC",
              help="Capability OPS=PREFIX[;expires=ISO-8601][;budget=N]; repeatable. Default: the source's.")
@click.option("--boundary", type=click.Choice(["isolated", "autonomous"]),
              help="isolated: commit merges into the parent view; autonomous: commit goes to the trunk.")
@click.argument("name")
@pass_ctx
def fork(ctx: Context, source: str | None, caps: tuple[str, ...], boundary: str | None, name: str) -> None:
    """Fork view NAME: one view object and one ref, whatever the namespace's size."""
    kernel_fork(ctx.repo, name, source, [Capability.parse(c) for c in caps] if caps else None, boundary)
    info = status(ctx.repo, name)
    ctx.emit(info.to_json(), f"forked view {name} from {info.parent} ({info.boundary}) as {info.id.hex()[:12]}")


COMMANDS = [fork]
