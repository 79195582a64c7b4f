"""The `reel` entry point: global options, command discovery, and errors mapped to exit statuses."""

from __future__ import annotations

import importlib
import pkgutil
import sys
from typing import Any

import click

from reelstore import plumbing, porcelain
from reelstore.cli.context import Context, report
from reelstore.errors import ReelError, StorageError


class ReelGroup(click.Group):
    """Loads a command's module only when that command runs (`cat-file` lives in `cat_file.py`), so a
    command does not pay for importing every other one; maps ReelError to the design's exit statuses."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(_all_commands())

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        stem = name.replace("-", "_")
        for package in (plumbing, porcelain) if stem.isidentifier() else ():
            module_name = f"{package.__name__}.{stem}"
            try:
                module = importlib.import_module(module_name)
            except ModuleNotFoundError as exc:
                if exc.name != module_name:
                    raise
                continue
            for command in getattr(module, "COMMANDS", ()):
                if command.name == name:
                    return command
        return _all_commands().get(name)

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
            report(StorageError(f"{exc.strerror or exc}: {exc.filename or ''}".rstrip(": ")), _as_json(ctx))
            ctx.exit(StorageError.exit_status)


def _as_json(ctx: click.Context) -> bool:
    obj = ctx.find_object(Context)
    return bool(obj and obj.json)


@click.group(cls=ReelGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-C", "directory", metavar="DIR", help="Run as if started in DIR (or DIR is the .reel directory).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document on stdout.")
@click.version_option(package_name="reelstore", prog_name="reel")
@click.pass_context
def cli(ctx: click.Context, directory: str | None, as_json: bool) -> None:
    """reel: fork, commit and abort views whose side effects fire only on commit."""
    ctx.obj = Context(directory, as_json)


def _all_commands() -> dict[str, click.Command]:
    """Every command of every plumbing and porcelain module (imports them all: for help and odd names)."""
    found: dict[str, click.Command] = {}
    for package in (plumbing, porcelain):
        for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda i: i.name):
            module = importlib.import_module(f"{package.__name__}.{info.name}")
            for command in getattr(module, "COMMANDS", ()):
                found[command.name] = command
    return found


def main(argv: list[str] | None = None) -> None:
    cli.main(args=argv, prog_name="reel")
