"""Progress lines for long commands: on stderr, and only when stderr is a terminal."""

from __future__ import annotations

import sys
from collections.abc import Callable

import click


def tty_progress() -> Callable[[str], None] | None:
    """A progress sink for the library, or None when nobody is watching. Text that ends in `\r`
    (a remote's running counter) is redrawn in place; anything else becomes a line."""
    if not sys.stderr.isatty():
        return None

    def show(text: str) -> None:
        click.echo(text if text.endswith(("\r", "\n")) else text + "\n", err=True, nl=False)

    return show
