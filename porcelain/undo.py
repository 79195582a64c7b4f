"""`reel undo`: put back the refs the store's newest operation moved."""

from __future__ import annotations

import click

from reelstore.cli.context import Context, pass_ctx
from reelstore.kernel.undo import undo as undo_op


@click.command("undo")
@pass_ctx
def undo(ctx: Context) -> None:
    """Undo the newest operation (`reel op log`): each ref it moved goes back, if none moved since.

    A fork, put, rm, effect, snapshot, restore or update-ref can be undone, and so can a commit whose
    record carries no effects on a trunk that tracks no remote, an abort of a view bound to no remote,
    and an undo (a second `reel undo` redoes). Anything else is refused (E014) with the reason; a ref
    that moved since is refused (E002). A refused undo changes nothing.
    """
    result = undo_op(ctx.repo)
    lines = [f"undid operation {result.op.id}: {result.op.message}"]
    for m in result.moves:
        old = m.old.short if m.old else "(none)"
        new = m.new.short if m.new else "(deleted)"
        lines.append(f"    {m.ref} {old} -> {new}")
    ctx.emit(result.to_json(), "\n".join(lines))


COMMANDS = [undo]
