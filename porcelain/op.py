"""`reel op log`: the store's operations, newest first: each verb that moved refs, who ran it, when,
and every ref it moved from what to what."""

from __future__ import annotations

import time

import click

from reelstore.backend.op_log import Operation, RefMove
from reelstore.cli.context import Context, pass_ctx
from reelstore.kernel.history import MAX_LIMIT
from reelstore.objects import Hash


@click.group("op", invoke_without_command=True)
@click.pass_context
def op(click_ctx: click.Context) -> None:
    """Show the store's operation log (`reel op log`; alone, `reel op` runs it); `reel undo` reverts the
    newest operation."""
    if click_ctx.invoked_subcommand is None:
        click_ctx.invoke(log, limit=None)


@op.command("log")
@click.option(
    "-n", "--max-count", "limit", type=click.IntRange(0, MAX_LIMIT), help="Show at most this many operations."
)
@pass_ctx
def log(ctx: Context, limit: int | None) -> None:
    """List operations, newest first: id, time, principal, verb and message, then each ref's old and new value."""
    newest = list(reversed(ctx.repo.ops.operations()))[:limit]
    ctx.emit({"operations": [_doc(o) for o in newest]}, lambda: "\n".join(_text(o) for o in newest), page=True)


def _doc(o: Operation) -> dict[str, object]:
    return {
        "id": o.id,
        "time_ms": o.time_ms,
        "principal": o.principal,
        "verb": o.verb,
        "message": o.message,
        "refs": [{"ref": m.ref, "old": _hex(m.old), "new": _hex(m.new)} for m in o.net()],
    }


def _text(o: Operation) -> str:
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(o.time_ms / 1000)) + "Z"
    lines = [f"{o.id} {when} {o.principal}: {o.message}"]
    lines += [f"    {_move(m)}" for m in o.net()]
    return "\n".join(lines)


def _move(m: RefMove) -> str:
    old = m.old.short if m.old else "(none)"
    new = m.new.short if m.new else "(deleted)"
    return f"{m.ref} {old} -> {new}"


def _hex(h: Hash | None) -> str | None:
    return None if h is None else h.hex()


COMMANDS = [op]
