"""`reel show-ref`: list refs as `<id> <name>` lines, filtered by pattern, or verify exact names."""

from __future__ import annotations

import click

from reelstore.cli.context import Context, pass_ctx
from reelstore.errors import NotFound
from reelstore.objects import Hash


def tail_matches(pattern: str, name: str) -> bool:
    """git's show-ref rule: the pattern matches the whole name or its tail on a `/` boundary."""
    return name == pattern or name.endswith("/" + pattern.strip("/"))


@click.command("show-ref")
@click.option("--heads", is_flag=True, help="Only refs under refs/heads/.")
@click.option("--views", is_flag=True, help="Only refs under refs/views/.")
@click.option("--hash", "hash_only", is_flag=True, help="Print only the ids.")
@click.option("--verify", is_flag=True, help="Each argument must name one ref exactly (full, or a short name).")
@click.argument("patterns", nargs=-1)
@pass_ctx
def show_ref(ctx: Context, heads: bool, views: bool, hash_only: bool, verify: bool, patterns: tuple[str, ...]) -> None:
    """List refs whose names end with one of PATTERNS (all refs if none); E001 if nothing matches."""
    repo = ctx.repo
    found: list[tuple[str, Hash]] = []
    if verify:
        if not patterns:
            raise click.UsageError("--verify needs at least one REF")
        for name in patterns:
            full = name if name.startswith("refs/") else repo.ref_name(name)
            if full is None:
                raise NotFound(f"{name!r} is not a ref")
            found.append((full, repo.refs[full]))
    else:
        prefixes = [p for p, on in (("refs/heads/", heads), ("refs/views/", views)) if on] or ["refs/"]
        for name, value in repo.refs.list():
            if any(name.startswith(p) for p in prefixes) and (
                not patterns or any(tail_matches(p, name) for p in patterns)
            ):
                found.append((name, value))
    if not found:
        raise NotFound("no ref matches" + (f" {' '.join(patterns)}" if patterns else ""))
    ctx.emit(
        [{"ref": name, "id": value.hex()} for name, value in found],
        "\n".join(value.hex() if hash_only else f"{value.hex()} {name}" for name, value in found),
    )


COMMANDS = [show_ref]
