"""`reel commit`: land a view in its trunk (and drain its effects) or merge it into its parent view."""

from __future__ import annotations

import click

from reelstore.cli.complete import REMOTES, VIEWS
from reelstore.cli.context import Context, pass_ctx
from reelstore.kernel.verbs import CommitResult
from reelstore.sync import verbs


def _text(res: CommitResult, notes: tuple[str, ...]) -> str:
    if res.record is None:
        return f"merged view {res.view} into {res.target} ({res.parent_view.hex()[:12] if res.parent_view else ''})"
    lines = [f"note: {n}" for n in notes]
    lines.append(f"committed view {res.view} to {res.target} as record {res.record.hex()}")
    if res.drain is not None:
        for o in res.drain.outcomes:
            lines.append(f"  effect {o.index} {o.op}: {o.state} ({o.action}){' - ' + o.note if o.note else ''}")
    return "\n".join(lines)


@click.command("commit")
@click.argument("view", shell_complete=VIEWS)
@click.option("-m", "--message", default="", help="Record message.")
@click.option(
    "--remote",
    metavar="REMOTE",
    shell_complete=REMOTES,
    help="First advance the trunk on REMOTE by compare-and-swap; drain only if that wins (else E015). "
    "The default is the remote the trunk tracks, if any.",
)
@click.option(
    "--retry",
    "retry",
    type=click.IntRange(0, 100),
    default=0,
    metavar="N",
    help="If another store wins the remote trunk first, fetch, replay the view onto its trunk and try "
    "again, up to N more times, after a jittered, growing wait (default 0).",
)
@pass_ctx
def commit(ctx: Context, view: str, message: str, remote: str | None, retry: int) -> None:
    """Commit VIEW: checks, then the target's compare-and-swap, then (into a trunk) the drain.
    Exits 0 only if every effect succeeded: 9 (E017) if one failed or was not sent, 7 (E011) if one's
    outcome is unknown.

    A view bound to a remote (pushed, cloned or fetched) is committed only with --remote at that
    remote (E015 otherwise), which also deletes the view's ref there in the same push.
    With --retry N, a lost race (E015) is followed by a fetch and another try, at most N times.
    """
    res = verbs.commit(ctx.repo, view, message, remote=remote, retry=retry)
    ctx.emit(res.to_json(), lambda: _text(res, res.notes))
    if res.drain is not None:
        res.drain.check(res)


COMMANDS = [commit]
