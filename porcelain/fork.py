"""`reel fork`: start a view over a trunk or another view (through the kernel's fork alone: the API's
Store would import the commit machinery too). The line it prints comes from the view just written;
only `--json` loads the status machinery for the view's full status document."""

from __future__ import annotations

import click

from reelstore.cli.complete import SOURCES
from reelstore.cli.context import Context, pass_ctx
from reelstore.kernel.fork import fork as kernel_fork
from reelstore.objects import Capability


@click.command("fork")
@click.option(
    "--from",
    "source",
    metavar="SOURCE",
    shell_complete=SOURCES,
    help="Trunk or view to fork (default: the store's trunk).",
)
@click.option(
    "--cap",
    "caps",
    multiple=True,
    metavar="SPEC",
    help="Capability OPS=PREFIX[;expires=ISO-8601][;budget=N]; repeatable. Default: the source's.",
)
@click.option(
    "--boundary",
    type=click.Choice(["isolated", "autonomous"]),
    help="isolated: commit merges into the parent view; autonomous: commit goes to the trunk.",
)
@click.argument("name")
@pass_ctx
def fork(ctx: Context, source: str | None, caps: tuple[str, ...], boundary: str | None, name: str) -> None:
    """Fork view NAME: one view object and one ref, whatever the namespace's size."""
    live = kernel_fork(ctx.repo, name, source, [Capability.parse(c) for c in caps] if caps else None, boundary)
    if ctx.json:
        from reelstore.kernel.inspection import status

        ctx.emit(status(ctx.repo, name).to_json())
    else:
        view = live.view
        ctx.emit(None, f"forked view {name} from {view.parent} ({view.boundary}) as {live.id.hex()[:12]}")


COMMANDS = [fork]
