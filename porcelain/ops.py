"""`reel ops`: the operations committed records owe, their states, evidence and next steps."""

from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import Any

import click

from reelstore.cli.complete import OPS
from reelstore.cli.context import Context, json_text, pass_ctx
from reelstore.drain import operator
from reelstore.drain.operator import OperatorState
from reelstore.drain.ops import UNRESOLVED, Operation
from reelstore.fleet.shared import find, list_ops, source
from reelstore.objects import OpEvent, Record, View


def _when(ms: int | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ms / 1000)) + "Z" if ms else "-"


def _line(o: Operation) -> str:
    where = f"{o.trunk} {o.record.hex()[:12]} #{o.index}"
    return f"{o.op}  {o.state:<9} {o.effect.delivery:<9} {o.effect.resource}  ({where})"


def _request_lines(req: dict[str, Any]) -> list[str]:
    if req["adapter"] != "http":
        return [f"request    {json_text(req['op'], indent=None)}"]
    lines = [f"request    {req['method']} {req['url']}"]
    if req["headers"]:
        lines.append(f"headers    {json_text(req['headers'], indent=None)}")
    if req["body"] is not None:
        body = req["body"]
        lines.append(f"body       {body if isinstance(body, str) else json_text(body, indent=None)}")
    return lines


def _finding(o: Operation) -> dict[str, Any] | None:
    f = o.finding
    if f is None:
        return None
    return {
        "finding": f.id.hex(),
        "outcome": f.outcome,
        "observer": f.observer,
        "evidence": f.evidence,
        "time": f.time,
        "source": f.source or None,
        "scope": f.scope or None,
    }


def _finding_lines(o: Operation) -> list[str]:
    f = o.finding
    if f is None:
        return []
    return [
        f"finding    {f.outcome} by {f.observer} [{_when(f.time)}] ({f.id.hex()[:12]})",
        f"source     {f.source or '-'}",
        f"scope      {f.scope or '-'}",
    ]


def detail(o: Operation, view: str, st: OperatorState, req: dict[str, Any]) -> str:
    now = int(time.time() * 1000)
    lines = [
        f"operation  {o.op}",
        f"state      {o.state}" + (f" (closed, uncertainty accepted by {st.closed.actor})" if st.closed else ""),
        f"trunk      {o.trunk}",
        f"record     {o.record.hex()}",
        f"view       {view}",
        f"effect     {o.effect.id.hex()} (index {o.index})",
        f"adapter    {o.effect.adapter}",
        f"resource   {o.effect.resource}",
        f"class      {o.effect.effect_class}, delivery {o.effect.delivery}",
        f"principal  {o.effect.principal or '-'}",
        *_request_lines(req),
        *(
            [
                f"supersedes {o.effect.meta['supersedes']} (approved by {o.effect.meta.get('approved_by', '?')}; "
                f"the predecessor was {o.effect.meta.get('predecessor_state', '?')} and keeps its duplicate risk)"
            ]
            if "supersedes" in o.effect.meta
            else []
        ),
        f"assignee   {st.assignee or '-'}",
        f"escalation {st.escalated_to or '-'}"
        + (f", deadline {_when(st.deadline)}" if st.deadline else "")
        + (" (OVERDUE)" if st.overdue(now) else ""),
        f"intent     {_intent(o)}",
        f"evidence   {o.evidence} [{_when(o.evidence_time)}]",
        *_finding_lines(o),
    ]
    if o.why_unknown:
        lines.append(f"why        {o.why_unknown}")
    lines.append(f"next       {o.next_action}")
    for e in o.history:
        lines.append(f"  journal {e.id.hex()[:12]} {_when(e.time)} epoch {e.epoch} {e.state}: {e.note}")
    for ev in st.events:
        lines.append(f"  {ev.action:<8} {ev.id.hex()[:12]} {_when(ev.time)} by {ev.actor}" + _event_detail(ev))
    return "\n".join(lines)


def _intent(o: Operation) -> str:
    intents = [e for e in o.history if e.state == "unknown"]
    if not intents:
        return "none journaled: nothing was sent"
    last = intents[-1]
    return f"journaled {_when(last.time)} in epoch {last.epoch} ({last.id.hex()[:12]})"


def _event_detail(ev: OpEvent) -> str:
    parts = [
        f" to {ev.to}" if ev.to else "",
        f" deadline {_when(ev.deadline)}" if ev.deadline else "",
        f": {ev.result}" if ev.result else "",
        f" ({ev.note})" if ev.note else "",
    ]
    return "".join(parts)


def _view_name(ctx: Context, o: Operation) -> str:
    rec = ctx.repo.objects.get_as(o.record, Record)
    if rec.view is None:
        return "-"
    view = ctx.repo.objects.get_as(rec.view, View)
    return f"{view.meta.get('name', '?')} ({rec.view.hex()[:12]})"


def _deadline(text: str | None) -> int:
    """An absolute ISO-8601 time, or a delay from now: 90s, 30m, 4h, 2d."""
    if not text:
        return 0
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    if text[-1:] in units and text[:-1].isdigit():
        return int((time.time() + int(text[:-1]) * units[text[-1]]) * 1000)
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise click.BadParameter(f"{text!r} is neither an ISO-8601 time nor a delay like 4h") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return int(when.timestamp() * 1000)


@click.group("ops", invoke_without_command=True)
@click.option("--unresolved", is_flag=True, help="Only pending, not-sent and unknown operations.")
@pass_ctx
def ops(ctx: Context, unresolved: bool) -> None:
    """List the operations of committed records: state, tier, resource, and what to do next."""
    if click.get_current_context().invoked_subcommand is not None:
        return
    found = list_ops(ctx.repo, unresolved)

    now = int(time.time() * 1000)
    states = {o.op: operator.state(ctx.repo, o.op) for o in found if o.state in UNRESOLVED}

    def text() -> str:
        out = []
        for o in found:
            st = states.get(o.op)
            flags = ""
            if st is not None:
                flags = "".join(
                    [
                        f"  [assigned {st.assignee}]" if st.assignee else "",
                        "  [OVERDUE]" if st.overdue(now) else "",
                        "  [closed]" if st.closed else "",
                    ]
                )
            out.append(_line(o) + flags)
            if o.state in UNRESOLVED and not (st and st.closed):
                out.append(f"    next: {o.next_action}")
        return "\n".join(out) or ("no unresolved operations" if unresolved else "no operations")

    docs = []
    for o in found:
        doc = o.to_json()
        if o.op in states:
            doc["operator"] = states[o.op].to_json(now)
        docs.append(doc)
    ctx.emit(docs, text)


@ops.command("show")
@click.argument("op", shell_complete=OPS)
@pass_ctx
def show(ctx: Context, op: str) -> None:
    """Show one operation (id or unique prefix) with its whole journal history."""
    found = find(ctx.repo, op)
    st = operator.state(ctx.repo, found.op)
    view = _view_name(ctx, found)
    req = operator.request(ctx.repo, found)
    doc = found.to_json()
    doc.update(operator=st.to_json(), view=view, intent=_intent(found), request=req, reconciliation=_finding(found))
    ctx.emit(doc, lambda: detail(found, view, st, req))


def _event(ctx: Context, ev: OpEvent, text: str) -> None:
    ctx.emit(
        {
            "op": ev.op,
            "action": ev.action,
            "event": ev.id.hex(),
            "actor": ev.actor,
            "to": ev.to or None,
            "deadline": ev.deadline or None,
            "time": ev.time,
        },
        text,
    )


@ops.command("assign")
@click.argument("op", shell_complete=OPS)
@click.option("--to", "to", required=True, help="The reconciliation owner.")
@click.option("--by", "by", help="Who assigns (default: REEL_PRINCIPAL or the user).")
@pass_ctx
def assign(ctx: Context, op: str, to: str, by: str | None) -> None:
    """Make TO the owner of unresolved operation OP's reconciliation (recorded, attributed)."""
    ev = operator.assign(ctx.repo, op, to, by, source(ctx.repo))
    _event(ctx, ev, f"{ev.op}: assigned to {to}")


@ops.command("escalate")
@click.argument("op", shell_complete=OPS)
@click.option("--to", "to", required=True, help="The escalation owner.")
@click.option("--deadline", help="When OP becomes overdue: an ISO-8601 time or a delay (90s, 30m, 4h, 2d).")
@click.option("--by", "by", help="Who escalates (default: REEL_PRINCIPAL or the user).")
@pass_ctx
def escalate(ctx: Context, op: str, to: str, deadline: str | None, by: str | None) -> None:
    """Name OP's escalation owner and deadline; past it, `reel ops` flags OP overdue and notices go to TO."""
    ev = operator.escalate(ctx.repo, op, to, _deadline(deadline), by, source(ctx.repo))
    _event(ctx, ev, f"{ev.op}: escalated to {to}" + (f", overdue after {_when(ev.deadline)}" if ev.deadline else ""))


@ops.command("notify")
@pass_ctx
def notify(ctx: Context) -> None:
    """Run .reel/hooks/notify once per unresolved operation (bounded by ops.maxNotices per recipient)
    and record each delivery with its result. A notice settles nothing."""
    report = operator.notify(ctx.repo, source=source(ctx.repo))
    lines = [f"{e.op}: notice to {e.to}: {e.result}" for e in report.sent]
    lines += [f"{op}: no notice ({why})" for op, why in report.skipped.items()]
    ctx.emit(report.to_json(), "\n".join(lines) or "no unresolved operations")


@ops.command("ack")
@click.argument("op", shell_complete=OPS)
@click.option("--by", "by", required=True, help="Who acknowledges the operation.")
@click.option("--note", default="", help="What they are doing about it.")
@pass_ctx
def ack(ctx: Context, op: str, by: str, note: str) -> None:
    """Record that BY knows of OP, with or without a delivered notice. It does not settle OP nor lift
    the drain's halt."""
    ev = operator.ack(ctx.repo, op, by, note, source(ctx.repo))
    _event(ctx, ev, f"{ev.op}: acknowledged by {by}; still unresolved")


@ops.command("close")
@click.argument("op", shell_complete=OPS)
@click.option("--accept-uncertainty", is_flag=True, help="Required: the outcome stays unknown, for good.")
@click.option("--by", "by", required=True, help="Who takes the decision.")
@click.option("--note", default="", help="Why.")
@pass_ctx
def close(ctx: Context, op: str, accept_uncertainty: bool, by: str, note: str) -> None:
    """Close unknown operation OP's incident with its uncertainty accepted. Its effect, journal and
    history stay as they are; nothing is sent, and its record's drain stays halted at it."""
    ev = operator.close(ctx.repo, op, by, note, accept_uncertainty, source(ctx.repo))
    _event(ctx, ev, f"{ev.op}: closed by {by}; its outcome stays unknown")


COMMANDS = [ops]
