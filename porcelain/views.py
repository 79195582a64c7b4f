"""`reel views`: list the live views."""

from __future__ import annotations

import click

from reelstore.api import Store
from reelstore.cli.context import Context, pass_ctx


@click.command("views")
@pass_ctx
def views(ctx: Context) -> None:
    """List live views: name, id, parent, boundary, changed names and pending effects."""
    rows = Store(ctx.repo).views()

    def text() -> str:
        return "\n".join(f"{r['name']}\t{r['id'][:12]}\t{r['parent']}\t{r['boundary']}\t"
                         f"{r['changes']} changed\t{r['effects']} effects" for r in rows)

    ctx.emit({"views": rows}, text)


COMMANDS = [views]
