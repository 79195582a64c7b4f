"""`reel commit`: land a view in its trunk (and drain its effects) or merge it into its parent view."""

from __future__ import annotations

import click

from reelstore.api import Store
from reelstore.cli.context import Context, pass_ctx
from reelstore.kernel.verbs import CommitResult


def _text(res: CommitResult) -> str:
    if res.record is None:
        return f"merged view {res.view} into {res.target} ({res.parent_view.hex()[:12] if res.parent_view else ''})"
    lines = [f"committed view {res.view} to {res.target} as record {res.record.hex()}"]
    if res.drain is not None:
        for o in res.drain.outcomes:
            lines.append(f"  effect {o.index} {o.op}: {o.state} ({o.action}){' - ' + o.note if o.note else ''}")
    return "\n".join(lines)


@click.command("commit")
@click.argument("view")
@click.option("-m", "--message", default="", help="Record message.")
@click.option("--remote", metavar="REMOTE",
              help="First advance the trunk on REMOTE by compare-and-swap; drain only if that wins (else E015).")
@pass_ctx
def commit(ctx: Context, view: str, message: str, remote: str | None) -> None:
    """Commit VIEW: checks, then the target's compare-and-swap, then (into a trunk) the drain.
    Exits 0 only if every effect succeeded: 9 (E017) if one failed or was not sent, 7 (E011) if one's
    outcome is unknown."""
    fence = None
    if remote:
        from reelstore import sync  # on use: it loads dulwich, which most commands never need

        fence = sync.remote_fence(ctx.repo, remote)
    res = Store(ctx.repo).commit(view, message, fence=fence, check=False)
    ctx.emit(res.to_json(), lambda: _text(res))
    if res.drain is not None:
        res.drain.check(res)


COMMANDS = [commit]
