"""`reel show`: an object, decoded and pretty-printed."""

from __future__ import annotations

from typing import Any

import click

from reelstore import revisions
from reelstore.cli.complete import REVISIONS
from reelstore.cli.context import Context, json_text, pass_ctx
from reelstore.codec import thaw
from reelstore.objects import Object, Record, Recording, View


@click.command("show")
@click.argument("obj", shell_complete=REVISIONS)
@pass_ctx
def show(ctx: Context, obj: str) -> None:
    """Show OBJ (an id, a unique prefix, or a ref/view/trunk name): its kind, id and fields."""
    h = revisions.resolve(ctx.repo, obj)
    o = ctx.repo.objects.get(h)
    doc: dict[str, Any] = {"id": h.hex(), "kind": o.kind, "object": thaw(o.to_json())}
    reads = _recorded_reads(ctx, o)
    calls: list[dict[str, Any]] = []
    if reads is not None:
        from reelstore.intercept.recording import calls_total
        from reelstore.porcelain.run import model_call_lines

        doc["recorded_reads"] = [{k: v for k, v in r.items() if k != "call"} for r in reads]
        calls = [r["call"] for r in reads if r["call"] is not None]
        doc["model_calls"] = calls
        doc["model_total"] = calls_total(calls)
    approvals = _approvals(ctx, o)
    if approvals:
        doc["approvals"] = approvals

    def text() -> str:
        out = click.style(f"{o.kind} {h.hex()}", fg="yellow") + "\n" + json_text(doc["object"])
        if reads:
            out += "\nrecorded reads (reel run --record):\n" + "\n".join(
                f"  {r['index']}  {r['method']} {r['url']} -> {r['status']}" for r in reads
            )
        if calls:
            out += "\nmodel calls:\n" + "\n".join(model_call_lines(calls))
        if approvals:
            out += "\napprovals its effects carried:\n" + "\n".join(
                f"  {a['verdict']} by {a['by']} (recorded by {a['principal']}, principal from {a['via']}) "
                f"{a['id'][:12]}" + (f": {a['note']}" if a["note"] else "")
                for a in approvals
            )
        return out

    ctx.emit(doc, text, page=True)


def _approvals(ctx: Context, o: Object) -> list[dict[str, Any]]:
    """The approvals a record's view (or a view) lists: for a record, those that let its effects fire."""
    view = ctx.repo.objects.get(o.view) if isinstance(o, Record) and o.view is not None else o
    if not isinstance(view, View) or not view.approvals:
        return []
    from reelstore.kernel.approval import carried, describe

    return [describe(a) for a in carried(ctx.repo, view)]


def _recorded_reads(ctx: Context, o: Object) -> list[dict[str, Any]] | None:
    """The recording of a view, or of the view a record committed, entry by entry."""
    view = ctx.repo.objects.get(o.view) if isinstance(o, Record) and o.view is not None else o
    if not isinstance(view, View) or view.recording is None:
        return None
    from reelstore.intercept.recording import call_line

    rec = ctx.repo.objects.get_as(view.recording, Recording)
    out = []
    calls = 0
    for i, e in enumerate(rec.entries):
        call = None
        if "model" in e:
            call = call_line(calls, e)
            calls += 1
        out.append(
            {
                "index": i,
                "method": e["method"],
                "url": e["url"],
                "status": e["status"],
                "fingerprint": e["fp"],
                "call": call,
            }
        )
    return out


COMMANDS = [show]
