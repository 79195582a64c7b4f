"""`reel diff`: the names a view changed since its base."""

from __future__ import annotations

import click

from reelstore.api import Store
from reelstore.cli.complete import SOURCES
from reelstore.cli.context import Context, pass_ctx
from reelstore.objects import Hash

_MARK = {"added": "A", "modified": "M", "removed": "D"}
_MARK_COLOUR = {"added": "green", "modified": "yellow", "removed": "red"}


def _mark(status: str) -> str:
    """A name's status letter, coloured as git colours added, modified and deleted (stripped when off)."""
    return click.style(_MARK[status], fg=_MARK_COLOUR[status])


@click.command("diff")
@click.argument("view", shell_complete=SOURCES)
@click.argument("other", required=False, shell_complete=SOURCES)
@pass_ctx
def diff(ctx: Context, view: str, other: str | None) -> None:
    """List VIEW's changes against its base: A added, M modified, D removed, with old and new ids.
    With OTHER, compare two runs (views or records): their names, and their effects aligned."""
    if other is not None:
        _runs(ctx, view, other)
        return
    rows = Store(ctx.repo).handle(view).diff()

    def text() -> str:
        return "\n".join(f"{_mark(r.status)}\t{_short(r.old)}\t{_short(r.new)}\t{r.name}" for r in rows)

    ctx.emit({"view": view, "changes": [r.to_json() for r in rows]}, text, page=True)


def _short(h: Hash | None) -> str:
    return h.hex()[:12] if h is not None else "-"


_EFFECT_MARK = {"same": " ", "changed": "M", "added": "A", "removed": "D"}
_PAINT = (("@@", "cyan"), ("+", "green"), ("-", "red"))


def _painted(line: str) -> str:
    """A line of an effect's unified diff in git's colours (stripped again when colour is off)."""
    colour = next((c for start, c in _PAINT if line.startswith(start)), None)
    return click.style(line, fg=colour) if colour else line


def _runs(ctx: Context, a: str, b: str) -> None:
    from reelstore.kernel.rundiff import diff_runs

    result = diff_runs(ctx.repo, a, b)

    def text() -> str:
        lines = [f"names ({a} -> {b}):" if result.names else f"names: no difference between {a} and {b}"]
        lines += [f"  {_mark(n.status)}\t{n.name}" for n in result.names]
        lines.append("effects:" if result.effects else "effects: none on either side")
        for e in result.effects:
            side = e.b or e.a
            assert side is not None
            lines.append(f"  {_EFFECT_MARK[e.status]} {e.status:<8} {side.adapter} {side.resource}")
            lines += [f"      {_painted(line)}" for line in e.diff.splitlines()[2:]]
        return "\n".join(lines)

    ctx.emit(result.to_json(), text, page=True)


COMMANDS = [diff]
