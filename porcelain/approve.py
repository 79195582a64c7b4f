"""`reel approve`: sign off on exactly the effects a view would fire, as a principal other than its initiator."""

from __future__ import annotations

import click

from reelstore.api import Store
from reelstore.cli.complete import VIEWS
from reelstore.cli.context import Context, pass_ctx
from reelstore.kernel.approval import describe
from reelstore.objects import Approval, Hash


def said(a: Approval, what: str) -> str:
    """One line for a recorded approval or refusal."""
    effects = a.effects.hex()[:12] if a.effects else "no effects"
    return (
        f"{what} view {a.view} (pending effects {effects}, names {a.namespace.hex()[:12]}) by {a.by}, "
        f"recorded by {a.principal} (principal from {a.via}): {a.id.hex()}"
    )


def expected(text: str | None) -> Hash | None:
    return None if text is None else Hash.from_hex(text)


@click.command("approve")
@click.argument("view", shell_complete=VIEWS)
@click.option(
    "--by",
    "by",
    required=True,
    metavar="NAME",
    help="Who approves (not the view's initiator, nor whoever queued its effects).",
)
@click.option("-m", "--message", "note", default="", metavar="WHY", help="Why, kept in the approval.")
@click.option(
    "--effects",
    "expect",
    metavar="ID",
    help="The pending-effects id you reviewed (`effects` in "
    "`reel show VIEW`): refused (E002) if the view now holds other effects.",
)
@pass_ctx
def approve(ctx: Context, view: str, by: str, note: str, expect: str | None) -> None:
    """Approve VIEW's pending effects and names exactly as they are now.

    The approval names the view's pending-effects object and namespace root: any later change to the
    view (a new or changed effect, a put) makes it stale, and the next commit says so. It travels with
    the view on push and fetch. Refused (E009) when NAME, or the principal running this, is the view's
    initiator or queued one of its effects.
    """
    a = Store(ctx.repo).approve(view, by, note, expected(expect))
    ctx.emit({"approval": describe(a)}, said(a, "approved"))


COMMANDS = [approve]
