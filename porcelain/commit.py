"""`reel commit`: land a view in its trunk (and drain its effects) or merge it into its parent view."""

from __future__ import annotations

import click

from reelstore.api import Store
from reelstore.cli.complete import REMOTES, VIEWS
from reelstore.cli.context import Context, pass_ctx
from reelstore.errors import BadInput
from reelstore.kernel import binding
from reelstore.kernel.names import VIEW_PREFIX
from reelstore.kernel.verbs import CommitResult
from reelstore.kernel.views import load_live


def _text(res: CommitResult, notes: list[str]) -> str:
    if res.record is None:
        return f"merged view {res.view} into {res.target} ({res.parent_view.hex()[:12] if res.parent_view else ''})"
    lines = [f"note: {n}" for n in notes]
    lines.append(f"committed view {res.view} to {res.target} as record {res.record.hex()}")
    if res.drain is not None:
        for o in res.drain.outcomes:
            lines.append(f"  effect {o.index} {o.op}: {o.state} ({o.action}){' - ' + o.note if o.note else ''}")
    return "\n".join(lines)


def _default_remote(ctx: Context, view: str) -> str | None:
    """The remote the view's trunk tracks, for a commit into a trunk (a merge into a parent view has none)."""
    live = load_live(ctx.repo, view, settle=False)
    if live.view.boundary == "isolated" and live.view.parent.startswith(VIEW_PREFIX):
        return None
    return binding.tracked_remote(ctx.repo, live.trunk)


@click.command("commit")
@click.argument("view", shell_complete=VIEWS)
@click.option("-m", "--message", default="", help="Record message.")
@click.option("--remote", metavar="REMOTE", shell_complete=REMOTES,
              help="First advance the trunk on REMOTE by compare-and-swap; drain only if that wins (else E015). "
                   "The default is the remote the trunk tracks, if any.")
@click.option("--retry", "retry", type=click.IntRange(0, 100), default=0, metavar="N",
              help="If another store wins the remote trunk first, fetch, replay the view onto its trunk and try "
                   "again, up to N more times, after a jittered, growing wait (default 0).")
@pass_ctx
def commit(ctx: Context, view: str, message: str, remote: str | None, retry: int) -> None:
    """Commit VIEW: checks, then the target's compare-and-swap, then (into a trunk) the drain.
    Exits 0 only if every effect succeeded: 9 (E017) if one failed or was not sent, 7 (E011) if one's
    outcome is unknown.

    A view bound to a remote (pushed, cloned or fetched) is committed only with --remote at that
    remote (E015 otherwise), which also deletes the view's ref there in the same push.
    With --retry N, a lost race (E015) is followed by a fetch and another try, at most N times.
    """
    remote = remote or _default_remote(ctx, view)
    fence = None
    if remote:
        from reelstore import sync  # on use: it loads dulwich, which most commands never need

        fence = sync.remote_fence(ctx.repo, remote)
    lost: list[str] = []

    def once() -> CommitResult:
        return Store(ctx.repo).commit(view, message, fence=fence, check=False)

    if remote and retry:
        from reelstore.sync.retry import retrying

        res = retrying(ctx.repo, remote, retry, once, lost=lost)
    elif retry:
        raise BadInput("--retry applies to a commit fenced on a remote: give --remote REMOTE (or track one)",
                       field="retry")
    else:
        res = once()
    notes = [*lost, *(fence.result.notes if fence is not None and fence.result is not None else [])]
    ctx.emit({**res.to_json(), "remote": remote, "notes": notes}, lambda: _text(res, notes))
    if res.drain is not None:
        res.drain.check(res)


COMMANDS = [commit]
