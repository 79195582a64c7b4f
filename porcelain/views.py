"""`reel views`: list the live views (with the remote each is bound to), those awaiting approval, or
unbind one."""

from __future__ import annotations

import time

import click

from reelstore.api import Store
from reelstore.cli.complete import VIEWS
from reelstore.cli.context import Context, pass_ctx
from reelstore.kernel import binding
from reelstore.kernel.approval import Standing
from reelstore.kernel.views import load_live
from reelstore.wording import plural


@click.command("views")
@click.option(
    "--unbind",
    metavar="VIEW",
    shell_complete=VIEWS,
    help="DANGEROUS: let VIEW be committed locally although a copy of it may live on its remote, where "
    "another store can commit it too (its effects would then fire twice).",
)
@click.option(
    "--awaiting",
    is_flag=True,
    help="List only the views whose effects wait for approval: what each "
    "rule needs, who approved, and for how long the view has waited.",
)
@pass_ctx
def views(ctx: Context, unbind: str | None, awaiting: bool) -> None:
    """List live views: name, id, parent, boundary, changed names, pending effects and the remote
    each is bound to (its one commit point), or `-`."""
    if awaiting:
        _awaiting(ctx)
        return
    if unbind is not None:
        live = load_live(ctx.repo, unbind)
        was = binding.unbind(ctx.repo, live.view)
        ctx.emit(
            {"view": unbind, "unbound": was},
            f"view {unbind} is no longer bound to {was}: a plain commit now fires its effects here, even if "
            "another store commits its copy on that remote too"
            if was
            else f"view {unbind} was not bound",
        )
        return
    rows = Store(ctx.repo).views()

    def text() -> str:
        return "\n".join(
            f"{r.name}\t{click.style(r.id.hex()[:12], fg='yellow')}\t{r.parent}\t{r.boundary}\t"
            f"{r.changes} changed\t{plural(r.effects, 'effect')}\t"
            f"{click.style('bound to ' + r.remote, fg='cyan') if r.remote else '-'}"
            for r in rows
        )

    ctx.emit({"views": [r.to_json() for r in rows]}, text, page=True)


def _awaiting(ctx: Context) -> None:
    waiting = Store(ctx.repo).awaiting()
    now = int(time.time() * 1000)

    def line(st: Standing) -> str:
        needs = "; ".join(n.describe() for n in st.needs if not n.met)
        refused = "; ".join(f"refused by {a.by}" for a in st.rejected)
        stale = f"; stale approvals by {', '.join(st.stale_approvers)}" if st.stale_approvers else ""
        return (
            f"{st.view}\twaiting {_age(now - st.since) if st.since else '?'}\tinitiator {st.initiator}\t"
            f"{'; '.join(filter(None, (needs, refused)))}{stale}"
        )

    ctx.emit(
        {"awaiting": [dict(st.to_json(), age_ms=now - st.since if st.since else None) for st in waiting]},
        lambda: "\n".join(line(st) for st in waiting),
        page=True,
    )


def _age(ms: int) -> str:
    """A wait as people say it: 45s, 12m, 3h, 2d."""
    s = max(0, ms // 1000)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= size:
            return f"{s // size}{unit}"
    return f"{s}s"


COMMANDS = [views]
