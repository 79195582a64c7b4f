"""`reel ls`: list the names a view can read, or a trunk's names."""

from __future__ import annotations

import click

from reelstore.api import Store
from reelstore.cli.complete import SOURCES
from reelstore.cli.context import Context, pass_ctx
from reelstore.cli.refargs import trunk_namespace
from reelstore.namespace.tree import Namespace


@click.command("ls")
@click.argument("view", shell_complete=SOURCES)
@click.argument("prefix", required=False, default="")
@pass_ctx
def ls(ctx: Context, view: str, prefix: str) -> None:
    """List names (and blob ids) under PREFIX in VIEW, in name order. VIEW may be a trunk (`main`, or
    `refs/heads/main` when a view has the same name): its head record's names."""
    root = trunk_namespace(ctx.repo, view)
    if root is not None:
        rows = list(Namespace(ctx.repo.objects).items(root, prefix))
    else:
        rows = Store(ctx.repo).handle(view).ls(prefix)
    ctx.emit(
        {"view": view, "entries": [{"name": n, "id": h.hex()} for n, h in rows]},
        lambda: "\n".join(f"{h.hex()}\t{n}" for n, h in rows),
    )


COMMANDS = [ls]
