"""What a command prints for a person on stdout, coloured and paged as git decides it.

Colour: `--color=WHEN` / `--no-color`, else config `color.ui` (`always`/`true`… or `never`/`false`),
else none if NO_COLOR is set (and not empty, per no-color.org), else `auto`: only when stdout is a
terminal whose TERM is not dumb. Text is styled with click.style and click.echo strips the styling
when colour is off.

Pager: long output (`log`, `show`, `diff`, `views`) goes through click.echo_via_pager when stdout is a
terminal, unless `--no-pager` or `pager.<command> = false`. The pager is REEL_PAGER, else
`pager.<command>` when it names a program, else `core.pager`, else PAGER, else `less`; an empty one
or `cat` means none. As git, LESS defaults to `FRX` (quit if one screen, raw colour codes, keep the
screen) and LV to `-c`.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from reelstore.backend.config import Config
    from reelstore.cli.context import Context

_YES = ("true", "yes", "on", "1", "always")
_NO = ("false", "no", "off", "0", "never")


def _config(ctx: Context) -> Config | None:
    """The store's config, if this command opened a store (colour and pager never open one)."""
    repo = ctx.opened
    return repo.config if repo is not None else None


def colour(ctx: Context) -> bool:
    """Whether stdout gets colour codes (see the module doc for the order of the deciding settings)."""
    when = ctx.color
    if when is None:
        cfg = _config(ctx)
        setting = (cfg.get("color.ui") or "").lower() if cfg is not None else ""
        if setting in _YES:
            when = "always"
        elif setting in _NO:
            when = "never"
        elif os.environ.get("NO_COLOR"):
            when = "never"
    if when == "always":
        return True
    if when == "never":
        return False
    return sys.stdout.isatty() and os.environ.get("TERM", "dumb") not in ("", "dumb")


def pager(ctx: Context, command: str) -> str | None:
    """The pager command line for `command`'s output, or None when it is not paged."""
    if ctx.no_pager or ctx.json or not sys.stdout.isatty():
        return None
    cfg = _config(ctx)
    per_command = cfg.get(f"pager.{command}") if cfg is not None else None
    if per_command is not None and per_command.lower() in _NO:
        return None
    named = per_command if per_command is not None and per_command.lower() not in _YES else None
    chosen = os.environ.get("REEL_PAGER")
    if chosen is None:
        chosen = named or (cfg.get("core.pager") if cfg is not None else None)
    if chosen is None:
        chosen = os.environ.get("PAGER", "less")
    chosen = chosen.strip()
    return None if chosen in ("", "cat") else chosen


def echo(ctx: Context, text: str, *, page: bool = False) -> None:
    """Print `text` for a person: through the pager when `page` and the settings allow, coloured or not."""
    coloured = colour(ctx)
    here = click.get_current_context(silent=True)
    command = here.command.name if here is not None and here.command.name else ""
    program = pager(ctx, command) if page else None
    if program is None:
        click.echo(text, color=coloured)
        return
    os.environ["PAGER"] = program  # click runs the pager named here, with our LESS/LV in its environment
    os.environ.setdefault("LESS", "FRX")
    os.environ.setdefault("LV", "-c")
    click.echo_via_pager(text, color=coloured)
