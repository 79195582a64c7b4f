"""`reel show-ref`: list refs as `<id> <name>` lines, filtered by pattern, or verify exact names."""

from __future__ import annotations

from typing import NoReturn

import click

from reelstore.cli.complete import REFS
from reelstore.cli.context import Context, pass_ctx
from reelstore.errors import BadInput, NotFound
from reelstore.objects import Hash
from reelstore.objects.ref import check_ref_name


def tail_matches(pattern: str, name: str) -> bool:
    """git's show-ref rule: the pattern matches the whole name or its tail on a `/` boundary."""
    return name == pattern or name.endswith("/" + pattern.strip("/"))


def _missing(quiet: bool, err: NotFound) -> NoReturn:
    """A missing ref: E001, or with `-q` only its exit status, as scripts testing for a ref expect."""
    if quiet:
        click.get_current_context().exit(err.exit_status)
    raise err


@click.command("show-ref")
@click.option("--heads", is_flag=True, help="Only refs under refs/heads/.")
@click.option("--tags", is_flag=True, help="Only refs under refs/tags/.")
@click.option("--views", is_flag=True, help="Only refs under refs/views/.")
@click.option("-s", "--hash", "hash_only", is_flag=True, help="Print only the ids.")
@click.option("--abbrev", type=click.IntRange(4, 64), metavar="N", help="Print only the first N hex digits of ids.")
@click.option("-q", "--quiet", is_flag=True, help="Print nothing; only the exit status tells.")
@click.option("--verify", is_flag=True, help="Each argument must be a full ref name (refs/…) that exists.")
@click.argument("patterns", nargs=-1, shell_complete=REFS)
@pass_ctx
def show_ref(
    ctx: Context,
    heads: bool,
    tags: bool,
    views: bool,
    hash_only: bool,
    abbrev: int | None,
    quiet: bool,
    verify: bool,
    patterns: tuple[str, ...],
) -> None:
    """List refs whose names end with one of PATTERNS (all refs if none); E001 if nothing matches."""
    repo = ctx.repo
    found: list[tuple[str, Hash]] = []
    if verify:
        if not patterns:
            raise click.UsageError("--verify needs at least one REF")
        for name in patterns:
            if not name.startswith("refs/"):
                raise BadInput(f"{name!r} is not a full ref name: --verify wants refs/…")
            value = repo.refs.get(check_ref_name(name))
            if value is None:
                _missing(quiet, NotFound(f"{name!r} is not a ref", ref=name))
            found.append((name, value))
    else:
        chosen = (("refs/heads/", heads), ("refs/tags/", tags), ("refs/views/", views))
        prefixes = [p for p, on in chosen if on] or ["refs/"]
        for name, value in repo.refs.list():
            if any(name.startswith(p) for p in prefixes) and (
                not patterns or any(tail_matches(p, name) for p in patterns)
            ):
                found.append((name, value))
    if not found:
        _missing(quiet, NotFound("no ref matches" + (f" {' '.join(patterns)}" if patterns else "")))
    if quiet:
        return
    ctx.emit(
        [{"ref": name, "id": value.hex()} for name, value in found],
        "\n".join(value.hex()[:abbrev] if hash_only else f"{value.hex()[:abbrev]} {name}" for name, value in found),
    )


COMMANDS = [show_ref]
