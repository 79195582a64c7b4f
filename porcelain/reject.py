"""`reel reject`: refuse a view's effects; its commit waits until the view changes and is approved again."""

from __future__ import annotations

import click

from reelstore.api import Store
from reelstore.cli.complete import VIEWS
from reelstore.cli.context import Context, pass_ctx
from reelstore.kernel.approval import describe
from reelstore.porcelain.approve import expected, said


@click.command("reject")
@click.argument("view", shell_complete=VIEWS)
@click.option(
    "--by",
    "by",
    required=True,
    metavar="NAME",
    help="Who refuses (not the view's initiator, nor whoever queued its effects).",
)
@click.option("-m", "--message", "note", default="", metavar="WHY", help="Why, kept in the refusal.")
@click.option(
    "--effects",
    "expect",
    metavar="ID",
    help="The pending-effects id you reviewed: refused (E002) if the view now holds other effects.",
)
@pass_ctx
def reject(ctx: Context, view: str, by: str, note: str, expect: str | None) -> None:
    """Refuse VIEW's pending effects as they are now: its commit is refused (E018) until the view
    changes and is approved again. The refusal travels with the view, as approvals do."""
    a = Store(ctx.repo).reject(view, by, note, expected(expect))
    ctx.emit({"approval": describe(a)}, said(a, "rejected"))


COMMANDS = [reject]
