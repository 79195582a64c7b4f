"""`reel restore`: a view reset to a snapshot, in place when it is live; its Class C effects wait for the
user's commit."""

from __future__ import annotations

import warnings

import click

from reelstore.cli.complete import SNAPSHOTS, VIEWS
from reelstore.cli.context import Context, pass_ctx
from reelstore.kernel import snapshot as snapshots
from reelstore.wording import plural


@click.command("restore")
@click.option(
    "--as",
    "as_view",
    metavar="VIEW",
    shell_complete=VIEWS,
    help="The view to restore onto, reset in place if live (default: the snapshot's own view).",
)
@click.option("--no-effects", is_flag=True, help="Restore the namespace (Class A) only; leave every effect out.")
@click.argument("snapshot", shell_complete=SNAPSHOTS)
@pass_ctx
def restore(ctx: Context, as_view: str | None, no_effects: bool, snapshot: str) -> None:
    """Reset a view to SNAPSHOT (in place if live): names exactly, Class B re-checked, Class C pending."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", snapshots.RestoreWarning)
        result = snapshots.restore(ctx.repo, snapshot, as_view, effects=not no_effects)

    def text() -> str:
        how = "onto live view" if result.in_place else "as new view"
        lines = [
            f"restored snapshot {snapshot} {how} {result.view} ({result.id.hex()[:12]}): "
            f"{plural(len(result.pending), 'effect')} pending"
        ]
        for e in result.pending:
            lines.append(f"  pending  {e.effect_class} {e.effect.hex()[:12]} {e.adapter} {e.resource}")
        for e in result.changed:
            lines.append(f"warning: Class B effect {e.effect.hex()[:12]} on {e.resource}: {e.why}")
        for e in result.left_out:
            lines.append(f"left out {e.effect_class} {e.effect.hex()[:12]} {e.resource}: {e.why}")
        for e in result.dropped:
            lines.append(f"dropped  {e.effect_class} {e.effect.hex()[:12]} {e.resource}: not in the snapshot")
        if result.pending:
            lines.append(
                f"nothing was sent: `reel commit {result.view}` fires them, `reel abort {result.view}` drops them"
            )
        return "\n".join(lines)

    if ctx.json:  # the text form carries the warnings itself
        for e in result.changed:
            click.echo(f"warning: Class B effect {e.effect.hex()[:12]} on {e.resource}: {e.why}", err=True)
    ctx.emit(result.to_json(), text)


COMMANDS = [restore]
