"""`reel recover`: start a new epoch and resume every unfinished drain."""

from __future__ import annotations

import click

from reelstore.cli.context import Context, pass_ctx
from reelstore.drain.recovery import RecoveryReport
from reelstore.fleet.shared import recover as resume
from reelstore.wording import plural


def _text(rep: RecoveryReport) -> str:
    lines = [f"epoch {rep.epoch}: {plural(len(rep.drains), 'unfinished drain')}"]
    for d in rep.drains:
        lines.append(f"record {d.record.hex()} on {d.trunk}")
        for o in d.outcomes:
            lines.append(f"  effect {o.index} {o.op}: {o.state} ({o.action}){' - ' + o.note if o.note else ''}")
    return "\n".join(lines)


@click.command("recover")
@pass_ctx
def recover(ctx: Context) -> None:
    """Fence every older drainer with a new epoch, then resume: a not-sent effect is sent again (any
    tier); of the unknown ones, keyed effects are resent with the same key, queryable and two-phase ones
    reconciled first, blind ones stay unknown (exit 7). Exit 9 (E017) if an effect failed or is still
    not sent."""
    rep = resume(ctx.repo)
    ctx.emit(rep.to_json(), lambda: _text(rep))
    rep.check()


COMMANDS = [recover]
