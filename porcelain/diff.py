"""`reel diff`: the names a view changed since its base."""

from __future__ import annotations

import click

from reelstore.api import Store
from reelstore.cli.context import Context, pass_ctx

_MARK = {"added": "A", "modified": "M", "removed": "D"}


@click.command("diff")
@click.argument("view")
@pass_ctx
def diff(ctx: Context, view: str) -> None:
    """List VIEW's changes against its base: A added, M modified, D removed, with old and new ids."""
    rows = Store(ctx.repo).handle(view).diff()

    def text() -> str:
        return "\n".join(f"{_MARK[r['status']]}\t{(r['old'] or '-')[:12]}\t{(r['id'] or '-')[:12]}\t{r['name']}"
                         for r in rows)

    ctx.emit({"view": view, "changes": rows}, text)


COMMANDS = [diff]
