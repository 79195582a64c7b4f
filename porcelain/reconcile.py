"""`reel reconcile`: record an operator's finding about an unknown operation and settle it."""

from __future__ import annotations

import click

from reelstore.cli.complete import OPS
from reelstore.cli.context import Context, pass_ctx
from reelstore.fleet.shared import reconcile as settle


@click.command("reconcile")
@click.argument("op", shell_complete=OPS)
@click.option(
    "--outcome",
    required=True,
    type=click.Choice(["succeeded", "absent"]),
    help="What you established: the target acted (succeeded) or did not (absent).",
)
@click.option("--evidence", required=True, help="What you saw, e.g. the target's transaction id.")
@click.option("--observer", required=True, help="Who established it.")
@click.option("--source", default="", help="Where the evidence came from (the target's API, a statement, …).")
@click.option("--scope", default="", help="What the finding covers (this operation, an account and a day, …).")
@pass_ctx
def reconcile(ctx: Context, op: str, outcome: str, evidence: str, observer: str, source: str, scope: str) -> None:
    """Settle unknown operation OP with attributed evidence. Nothing is sent: `absent` is final, and
    sending again is a new effect in a new view. `reel recover` then drains the record's later effects."""
    found, finding = settle(ctx.repo, op, outcome, evidence, observer, source=source, scope=scope)
    doc = found.to_json()
    doc["finding"] = finding.id.hex()
    ctx.emit(
        doc,
        f"{found.op}: {outcome} (finding {finding.id.hex()} by {observer}); "
        "run `reel recover` to drain the record's later effects, if any",
    )


COMMANDS = [reconcile]
