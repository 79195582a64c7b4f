"""The `reel` entry point: global options, command discovery, and errors mapped to exit statuses."""

from __future__ import annotations

import importlib
import pkgutil
import sys
from typing import Any

import click
from reelstore.plumbing.context import Context, report

from reelstore import plumbing, porcelain
from reelstore.errors import ReelError, StorageError


class ReelGroup(click.Group):
    """Finds commands in every plumbing and porcelain module; maps ReelError to the design's exits."""

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


def _load() -> None:
    for package in (plumbing, porcelain):
        for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda i: i.name):
            module = importlib.import_module(f"{package.__name__}.{info.name}")
            for command in getattr(module, "COMMANDS", ()):
                cli.add_command(command)


_load()


def main(argv: list[str] | None = None) -> None:
    cli.main(args=argv, prog_name="reel")
