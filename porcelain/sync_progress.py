"""Progress lines for long commands: on stderr, and only when stderr is a terminal."""

from __future__ import annotations

import sys
from collections.abc import Callable

import click


def tty_progress() -> Callable[[str], None] | None:
    """A progress sink for the library, or None when nobody is watching."""
    if not sys.stderr.isatty():
        return None
    return lambda line: click.echo(line, err=True)
