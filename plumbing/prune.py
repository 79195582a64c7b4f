"""`reel prune`: delete unreachable loose objects older than the grace period. Packs are left to gc."""

from __future__ import annotations

import click

from reelstore.cli.context import Context, pass_ctx
from reelstore.maintenance.prune import prune as do_prune
from reelstore.wording import plural


@click.command("prune")
@click.option("--expire", metavar="AGE", help="Only objects older than AGE (default gc.pruneExpire, 2.weeks.ago).")
@click.option("-n", "--dry-run", is_flag=True, help="Only list what would be removed.")
@click.option("-v", "--verbose", is_flag=True, help="Name each object removed.")
@pass_ctx
def prune(ctx: Context, expire: str | None, dry_run: bool, verbose: bool) -> None:
    """Remove loose objects no ref or young reflog entry reaches and that are older than AGE."""
    report = do_prune(ctx.repo, expire, dry_run=dry_run)
    doc = {"removed": [h.hex() for h in report.removed], "kept_recent": report.kept_recent, "dry_run": dry_run}
    lines = [f"{'would remove' if dry_run else 'removed'} {h.hex()}" for h in report.removed] if verbose else []
    verb = "would remove" if dry_run else "removed"
    lines.append(f"{verb} {plural(len(report.removed), 'object')}; kept {report.kept_recent} unreachable young objects")
    ctx.emit(doc, "\n".join(lines))


COMMANDS = [prune]
