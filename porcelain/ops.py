"""`reel ops`: the operations committed records owe, their states, evidence and next steps."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import click

from reelstore.cli.context import Context, pass_ctx
from reelstore.drain.ops import UNRESOLVED, Operation, find, list_ops


def json_flag(f: Callable[..., Any]) -> Callable[..., Any]:
    """Accept `--json` after the command name too (`reel ops --unresolved --json`), as the global flag."""

    def turn_on(cctx: click.Context, _param: click.Parameter, value: bool) -> None:
        if value:
            cctx.ensure_object(Context).json = True

    return click.option("--json", "local_json", is_flag=True, expose_value=False, is_eager=True, callback=turn_on,
                        help="Print one JSON document on stdout.")(f)


def _when(ms: int | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ms / 1000)) + "Z" if ms else "-"


def _line(o: Operation) -> str:
    where = f"{o.trunk} {o.record.hex()[:12]} #{o.index}"
    return f"{o.op}  {o.state:<9} {o.effect.delivery:<9} {o.effect.resource}  ({where})"


def detail(o: Operation) -> str:
    lines = [
        f"operation  {o.op}",
        f"state      {o.state}",
        f"trunk      {o.trunk}",
        f"record     {o.record.hex()}",
        f"effect     {o.effect.id.hex()} (index {o.index})",
        f"adapter    {o.effect.adapter}",
        f"resource   {o.effect.resource}",
        f"class      {o.effect.effect_class}, delivery {o.effect.delivery}",
        f"principal  {o.effect.principal or '-'}",
        f"evidence   {o.evidence} [{_when(o.evidence_time)}]",
    ]
    if o.why_unknown:
        lines.append(f"why        {o.why_unknown}")
    lines.append(f"next       {o.next_action}")
    for e in o.history:
        lines.append(f"  journal {e.id.hex()[:12]} {_when(e.time)} epoch {e.epoch} {e.state}: {e.note}")
    return "\n".join(lines)


@click.group("ops", invoke_without_command=True)
@json_flag
@click.option("--unresolved", is_flag=True, help="Only pending, not-sent and unknown operations.")
@click.pass_context
def ops(cctx: click.Context, unresolved: bool) -> None:
    """List the operations of committed records: state, tier, resource, and what to do next."""
    if cctx.invoked_subcommand is not None:
        return
    ctx = cctx.find_object(Context)
    found = list_ops(ctx.repo, unresolved)

    def text() -> str:
        out = []
        for o in found:
            out.append(_line(o))
            if o.state in UNRESOLVED:
                out.append(f"    next: {o.next_action}")
        return "\n".join(out) or ("no unresolved operations" if unresolved else "no operations")

    ctx.emit([o.to_json() for o in found], text)


@ops.command("show")
@click.argument("op")
@json_flag
@pass_ctx
def show(ctx: Context, op: str) -> None:
    """Show one operation (id or unique prefix) with its whole journal history."""
    found = find(ctx.repo, op)
    ctx.emit(found.to_json(), lambda: detail(found))


COMMANDS = [ops]
