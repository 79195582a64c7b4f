"""`reel show`: an object, decoded and pretty-printed."""

from __future__ import annotations

import json

import click

from reelstore import revisions
from reelstore.cli.context import Context, pass_ctx
from reelstore.codec import thaw


@click.command("show")
@click.argument("obj")
@pass_ctx
def show(ctx: Context, obj: str) -> None:
    """Show OBJ (an id, a unique prefix, or a ref/view/trunk name): its kind, id and fields."""
    h = revisions.resolve(ctx.repo, obj)
    o = ctx.repo.objects.get(h)
    doc = {"id": h.hex(), "kind": o.kind, "object": thaw(o.to_json())}
    ctx.emit(doc, lambda: f"{o.kind} {h.hex()}\n" + json.dumps(doc["object"], indent=2, sort_keys=True,
                                                                 ensure_ascii=False))


COMMANDS = [show]
