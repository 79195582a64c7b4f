"""`reel status`: what a view changed and what it would fire."""

from __future__ import annotations

import click

from reelstore.api import Store
from reelstore.cli.complete import VIEWS
from reelstore.cli.context import Context, pass_ctx
from reelstore.kernel.inspection import ViewStatus


def _text(info: ViewStatus) -> str:
    lines = [
        f"view {info.view} ({info.boundary}, depth {info.depth})  {info.id.hex()}",
        f"parent  {info.parent}",
        f"base    {info.base.hex() if info.base else None}",
        "capabilities:",
    ]
    lines += [f"  {c.spec()}" for c in info.caps] or ["  (none)"]
    lines.append(f"changes ({len(info.changes)}):")
    lines += [
        f"  {click.style('put   ', fg='green') if c.op == 'put' else click.style('remove', fg='red')} {c.name}"
        for c in info.changes
    ]
    lines.append(f"pending effects ({len(info.effects)}), in the order they would fire on commit:")
    lines += [
        f"  {i}. {click.style(e.id.hex()[:12], fg='yellow')} class {e.effect_class} {e.delivery:9} {e.resource}"
        for i, e in enumerate(info.effects)
    ]
    return "\n".join(lines)


@click.command("status")
@click.argument("view", required=False, shell_complete=VIEWS)
@pass_ctx
def status(ctx: Context, view: str | None) -> None:
    """Show VIEW's base, changed names, pending effects in order and capabilities (no VIEW: every view)."""
    store = Store(ctx.repo)
    if view is not None:
        info = store.status(view)
        ctx.emit(info.to_json(), lambda: _text(info))
        return
    infos = [store.status(v.name) for v in store.views()]
    ctx.emit({"views": [i.to_json() for i in infos]}, lambda: "\n\n".join(_text(i) for i in infos) or "no live views")


COMMANDS = [status]
