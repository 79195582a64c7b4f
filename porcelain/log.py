"""`reel log`: a trunk's records with their effects' outcomes."""

from __future__ import annotations

import datetime as dt

import click

from reelstore.api import Store
from reelstore.cli.complete import REVISIONS
from reelstore.cli.context import Context, pass_ctx
from reelstore.kernel.history import LogEntry, log_revisions


def _oneline(entries: list[LogEntry], graph: bool) -> str:
    """git's `--oneline`: the short id and the message's first line (`* ` in front with --graph)."""
    mark = "* " if graph else ""
    return "\n".join(
        f"{mark}{click.style(e.record.short, fg='yellow')} {e.message.splitlines()[0] if e.message else ''}".rstrip()
        for e in entries
    )


def _graphed(text: str) -> str:
    """git's --graph for a single-parent history: `* ` on a record's first line, `| ` on the rest."""
    out = []
    for line in text.split("\n"):
        if click.unstyle(line).startswith("record "):
            out.append("* " + line)
        else:
            out.append(("| " + line).rstrip())
    return "\n".join(out)


def _text(entries: list[LogEntry]) -> str:
    out = []
    for e in entries:
        when = dt.datetime.fromtimestamp(e.time_ms / 1000, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
        out.append(click.style(f"record {e.record.hex()}", fg="yellow"))
        out.append(f"Author: {e.author}\nDate:   {when}" + (f"\nView:   {e.view}" if e.view else ""))
        out.append(f"\n    {e.message}\n")
        for fx in e.effects:
            out.append(f"    effect {fx.index} {fx.op} {fx.adapter} {fx.resource}: {fx.state}")
        if e.effects:
            out.append("")
    return "\n".join(out).rstrip()


@click.command("log")
@click.argument("revs", nargs=-1, metavar="[REVISION]...", shell_complete=REVISIONS)
@click.option("-n", "--max-count", "limit", type=int, help="Show at most N records (0 to 2^63-1).")
@click.option("--oneline", is_flag=True, help="One line per record: its short id and message.")
@click.option("--graph", is_flag=True, help="Draw the history's line at the left, as git's --graph.")
@pass_ctx
def log(ctx: Context, revs: tuple[str, ...], limit: int | None, oneline: bool, graph: bool) -> None:
    """Show the records REVISIONs select (a trunk, A..B, ^A B, A...B; default: the store's trunk), newest
    first, with their effects' outcomes."""
    if revs:
        trunk, entries = log_revisions(ctx.repo, revs, limit)
    else:
        trunk, entries = ctx.repo.trunk, Store(ctx.repo).log(None, limit)

    def text() -> str:
        if oneline:
            return _oneline(entries, graph)
        return _graphed(_text(entries)) if graph else _text(entries)

    ctx.emit({"trunk": trunk, "records": [e.to_json() for e in entries]}, text, page=True)


COMMANDS = [log]
