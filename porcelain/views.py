"""`reel views`: list the live views (with the remote each is bound to), or unbind one."""

from __future__ import annotations

import click

from reelstore.api import Store
from reelstore.cli.complete import VIEWS
from reelstore.cli.context import Context, pass_ctx
from reelstore.kernel import binding
from reelstore.kernel.views import load_live
from reelstore.wording import plural


@click.command("views")
@click.option("--unbind", metavar="VIEW", shell_complete=VIEWS,
              help="DANGEROUS: let VIEW be committed locally although a copy of it may live on its remote, where "
                   "another store can commit it too (its effects would then fire twice).")
@pass_ctx
def views(ctx: Context, unbind: str | None) -> None:
    """List live views: name, id, parent, boundary, changed names, pending effects and the remote
    each is bound to (its one commit point), or `-`."""
    if unbind is not None:
        live = load_live(ctx.repo, unbind)
        was = binding.unbind(ctx.repo, live.view)
        ctx.emit({"view": unbind, "unbound": was},
                 f"view {unbind} is no longer bound to {was}: a plain commit now fires its effects here, even if "
                 "another store commits its copy on that remote too" if was else f"view {unbind} was not bound")
        return
    rows = Store(ctx.repo).views()

    def text() -> str:
        return "\n".join(f"{r.name}\t{click.style(r.id.hex()[:12], fg='yellow')}\t{r.parent}\t{r.boundary}\t"
                         f"{r.changes} changed\t{plural(r.effects, 'effect')}\t"
                         f"{click.style('bound to ' + r.remote, fg='cyan') if r.remote else '-'}" for r in rows)

    ctx.emit({"views": [r.to_json() for r in rows]}, text, page=True)


COMMANDS = [views]
