"""The `reel` entry point: global options, command discovery, and errors mapped to exit statuses."""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path
from typing import Any

import click

from reelstore import __version__
from reelstore.cli.command_index import COMMANDS as INDEX
from reelstore.cli.context import Context, report
from reelstore.errors import ReelError, StorageError, input_error


class ReelGroup(click.Group):
    """Loads a command's module only when that command runs, found through the command index, so a
    command (or `--help`, which reads the index alone) does not pay for importing every other one;
    maps ReelError to the design's exit statuses."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(INDEX)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        entry = INDEX.get(name)
        if entry is None:
            return None
        module = importlib.import_module(entry[0])
        return next((c for c in getattr(module, "COMMANDS", ()) if c.name == name), None)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(len(n) for n in names)
        with formatter.section("Commands"):
            formatter.write_dl([(n, click.Command(n, help=INDEX[n][1]).get_short_help_str(limit)) for n in names])

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except ReelError as err:
            report(err, _as_json(ctx))
            ctx.exit(err.exit_status)
        except BrokenPipeError:
            sys.stderr.close()
            ctx.exit(141)
        except OSError as exc:
            mapped = _os_error(ctx, exc)
            report(mapped, _as_json(ctx))
            ctx.exit(mapped.exit_status)


def _os_error(ctx: click.Context, exc: OSError) -> ReelError:
    """An OSError no command mapped: E007 only if it concerns the store's own files (or names no file);
    a file outside the store is the user's input (E001 / E014 with its path)."""
    obj = ctx.find_object(Context)
    store = obj.opened.path if obj is not None and obj.opened is not None else None
    name = exc.filename
    if name is not None and (store is None or not Path(os.path.abspath(name)).is_relative_to(store.resolve())):
        return input_error(exc, name)
    return StorageError(f"{exc.strerror or exc}: {name or ''}".rstrip(": "))


def _as_json(ctx: click.Context) -> bool:
    obj = ctx.find_object(Context)
    return bool(obj and obj.json)


@click.group(cls=ReelGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-C", "directory", metavar="DIR", help="Run as if started in DIR (or DIR is the .reel directory).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document on stdout.")
@click.version_option(version=__version__, prog_name="reel")
@click.pass_context
def cli(ctx: click.Context, directory: str | None, as_json: bool) -> None:
    """reel: fork, commit and abort views whose side effects fire only on commit."""
    ctx.obj = Context(directory, as_json)


def main(argv: list[str] | None = None) -> None:
    cli.main(args=argv, prog_name="reel")
