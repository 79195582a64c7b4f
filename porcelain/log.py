"""`reel log`: a trunk's records with their effects' outcomes."""

from __future__ import annotations

import datetime as dt

import click

from reelstore.api import Store
from reelstore.cli.context import Context, pass_ctx
from reelstore.kernel.history import LogEntry


def _text(entries: list[LogEntry]) -> str:
    out = []
    for e in entries:
        when = dt.datetime.fromtimestamp(e.time_ms / 1000, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
        out.append(f"record {e.record.hex()}")
        out.append(f"Author: {e.author}\nDate:   {when}" + (f"\nView:   {e.view}" if e.view else ""))
        out.append(f"\n    {e.message}\n")
        for fx in e.effects:
            out.append(f"    effect {fx.index} {fx.op} {fx.adapter} {fx.resource}: {fx.state}")
        if e.effects:
            out.append("")
    return "\n".join(out).rstrip()


@click.command("log")
@click.argument("trunk", required=False)
@click.option("-n", "--max-count", "limit", type=int, help="Show at most N records.")
@pass_ctx
def log(ctx: Context, trunk: str | None, limit: int | None) -> None:
    """Show TRUNK's records (default: the store's trunk), newest first, with their effects' outcomes."""
    entries = Store(ctx.repo).log(trunk, limit)
    ctx.emit({"trunk": trunk or ctx.repo.trunk, "records": [e.to_json() for e in entries]}, lambda: _text(entries))


COMMANDS = [log]
