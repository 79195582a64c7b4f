"""The `reel` entry point: global options, command discovery, and errors mapped to exit statuses."""

from __future__ import annotations

import gc
import importlib
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from reelstore import __version__
from reelstore.cli.command_index import COMMANDS as INDEX
from reelstore.cli.context import Context, json_text, report, with_json
from reelstore.errors import LOCAL_WRITE_ERRNOS, LocalWriteError, ReelError, StorageError, input_error

if TYPE_CHECKING:
    from click.shell_completion import CompletionItem


SECTIONS = {
    "porcelain": "Porcelain commands (the everyday verbs)",
    "plumbing": "Plumbing commands (low level, for scripts: objects, refs, packs)",
}
"""`reel --help`'s section titles, by the package a command's module lives in (reelstore.PACKAGE.…)."""


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
        found = next((c for c in getattr(module, "COMMANDS", ()) if c.name == name), None)
        return with_json(found) if found is not None else None

    def shell_complete(self, ctx: click.Context, incomplete: str) -> list[CompletionItem]:
        """Command names from the index alone (their one-line help as descriptions), so completing
        `reel <TAB>` imports no command module; the global options as click completes them."""
        from click.shell_completion import CompletionItem

        commands = [
            CompletionItem(n, help=click.Command(n, help=INDEX[n][1]).get_short_help_str())
            for n in self.list_commands(ctx)
            if n.startswith(incomplete)
        ]
        return commands + click.Command.shell_complete(self, ctx, incomplete)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The commands in one section per package they live in (porcelain, then plumbing), as git
        groups its own: where a command's module lives decides its section, so a new one needs no list."""
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(len(n) for n in names)
        groups: dict[str, list[str]] = {package: [] for package in SECTIONS}
        for n in names:
            groups.setdefault(INDEX[n][0].split(".")[1], []).append(n)
        for package, members in groups.items():
            if members:
                with formatter.section(SECTIONS.get(package, f"{package.capitalize()} commands")):
                    formatter.write_dl(
                        [(n, click.Command(n, help=INDEX[n][1]).get_short_help_str(limit)) for n in members]
                    )

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        """An unknown command name is a usage error that names the closest commands, as git's does."""
        name = args[0] if args else ""
        if name and name not in INDEX and not name.startswith("-") and not ctx.resilient_parsing:
            import difflib

            close = difflib.get_close_matches(name, list(INDEX), n=3, cutoff=0.6)
            if close:
                ctx.fail(f"No such command {name!r}. Did you mean {' or '.join(close)}?")
        return super().resolve_command(ctx, args)

    def make_context(
        self, info_name: str | None, args: list[str], parent: click.Context | None = None, **extra: Any
    ) -> click.Context:
        """Parse the global options; a usage error in them is a JSON error object when --json is asked."""
        try:
            return super().make_context(info_name, args, parent, **extra)
        except click.UsageError as err:
            if not wants_json(args):
                raise
            report_usage(err)
            sys.exit(err.exit_code)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta["reel.argv"] = list(args)
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.UsageError as err:
            if not (_as_json(ctx) or wants_json(ctx.meta.get("reel.argv", []))):
                raise
            report_usage(err)
            ctx.exit(err.exit_code)
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
    """An OSError no command mapped: E019 for a write this machine refused (disk full, quota, file size
    limit); else E007 only if it concerns the store's own files (or names no file); a file outside the
    store is the user's input (E001 / E014 with its path)."""
    name = exc.filename
    if exc.errno in LOCAL_WRITE_ERRNOS:
        return LocalWriteError(f"cannot write {name or 'the output'}: {exc.strerror or exc}", path=name)
    obj = ctx.find_object(Context)
    store = obj.opened.path if obj is not None and obj.opened is not None else None
    if name is not None and (store is None or not Path(os.path.abspath(name)).is_relative_to(store.resolve())):
        return input_error(exc, name)
    return StorageError(f"{exc.strerror or exc}: {name or ''}".rstrip(": "))


def wants_json(args: list[str]) -> bool:
    """Whether `--json` is among the arguments before a `--` (which starts another program's)."""
    for arg in args:
        if arg == "--":
            return False
        if arg == "--json":
            return True
    return False


def report_usage(err: click.UsageError) -> None:
    """A usage error as the JSON error object (docs/json.md): code `usage`, exit 2, the command's usage."""
    doc: dict[str, Any] = {"code": "usage", "message": err.format_message(), "exit": err.exit_code}
    if err.ctx is not None:
        doc["usage"] = err.ctx.get_usage()
    click.echo(json_text({"error": doc}, indent=None), err=True)


def _as_json(ctx: click.Context) -> bool:
    obj = ctx.find_object(Context)
    return bool(obj and obj.json)


@click.group(cls=ReelGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-C", "directory", metavar="DIR", help="Run as if started in DIR (or DIR is the .reel directory).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document on stdout.")
@click.option(
    "--color",
    "color",
    type=click.Choice(["auto", "always", "never"]),
    metavar="WHEN",
    help="Colour the output: auto (on a terminal), always or never; default: config color.ui, NO_COLOR, auto.",
)
@click.option("--no-color", is_flag=True, help="Same as --color=never.")
@click.option("-P", "--no-pager", is_flag=True, help="Never page the output (log, show, diff, views).")
@click.version_option(version=__version__, prog_name="reel")
@click.pass_context
def cli(
    ctx: click.Context, directory: str | None, as_json: bool, color: str | None, no_color: bool, no_pager: bool
) -> None:
    """reel: fork, commit and abort views whose side effects fire only on commit."""
    ctx.obj = Context(directory, as_json)
    ctx.obj.color = "never" if no_color else color
    ctx.obj.no_pager = no_pager


YOUNG_COLLECTION_EVERY = 20_000
"""The executable's first-generation collection threshold (the interpreter's default is 700). What a verb
allocates after click is loaded (5k-10k container objects: modules, classes, functions, the store's
state) nearly all lives until the exit, so the default's collections every 700 of them walked it again
and again for nothing. A long-running command still collects, every
20k allocations, so its cyclic garbage stays bounded."""


def main(argv: list[str] | None = None) -> None:
    """The `reel` executable: one command, then the process ends."""
    gc.set_threshold(YOUNG_COLLECTION_EVERY, *gc.get_threshold()[1:])
    try:
        cli.main(args=argv, prog_name="reel")
    finally:
        # Everything alive now lives until the exit, so it is frozen: the interpreter's last collection at
        # exit then walks none of it.
        gc.freeze()
