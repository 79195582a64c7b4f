"""`reel gc`: collect what no ref reaches, keep what is young, pack the rest."""

from __future__ import annotations

import click

from reelstore.cli.context import Context, pass_ctx
from reelstore.cli.progress import progress_for, progress_options
from reelstore.maintenance.gc import gc as do_gc
from reelstore.wording import plural


@click.command("gc")
@click.option(
    "--prune",
    "prune",
    metavar="AGE",
    help="Delete unreachable objects older than AGE: now, never, 2.weeks.ago, 1h, an ISO time "
    "(default gc.pruneExpire, 2.weeks.ago).",
)
@click.option("--no-prune", is_flag=True, help="Delete nothing; only pack.")
@click.option("--dry-run", "-n", is_flag=True, help="Report what would be packed and deleted; change nothing.")
@click.option(
    "--wait",
    "wait_s",
    type=click.FloatRange(0, 3600),
    default=0.0,
    show_default=True,
    help="Seconds to wait for another gc's lock before failing with E002.",
)
@click.option("-v", "--verbose", is_flag=True, help="Name each object deleted.")
@click.option(
    "--clear-stale-locks",
    is_flag=True,
    help="Only remove ref locks whose holder is provably dead (a process of this host that is gone).",
)
@click.option("--force", is_flag=True, help="With --clear-stale-locks: also locks older than the lock timeout.")
@progress_options
@pass_ctx
def gc(
    ctx: Context,
    prune: str | None,
    no_prune: bool,
    dry_run: bool,
    wait_s: float,
    verbose: bool,
    clear_stale_locks: bool,
    force: bool,
) -> None:
    """Mark from every ref and young reflog entry, then pack and prune (holds .reel/gc.lock). Ref locks
    left by dead processes of this host are removed first."""
    if no_prune and prune:
        raise click.UsageError("--prune and --no-prune exclude each other")
    if force and not clear_stale_locks:
        raise click.UsageError("--force goes with --clear-stale-locks")
    cleared = [] if dry_run else ctx.repo.refs.clear_stale_locks(force=force)
    cleared_lines = [f"removed stale lock {c.describe()}" for c in cleared]
    if clear_stale_locks:
        left = ctx.repo.refs.stale_locks()
        ctx.emit(
            {"removed": [str(c.path) for c in cleared], "stale": [str(c.path) for c in left]},
            "\n".join(
                cleared_lines
                + [f"left stale lock {c.describe()}: its holder may be alive; --force removes it" for c in left]
            )
            or "no stale locks",
        )
        return
    with progress_for(ctx) as progress:
        report = do_gc(
            ctx.repo,
            "never" if no_prune else prune,
            dry_run=dry_run,
            progress=progress.count if progress else None,
            wait_s=wait_s,
        )
    verb = "would delete" if dry_run else "deleted"
    lines = [f"{verb} {h.hex()}" for h in report.pruned_ids] if verbose else []
    lines.append(
        f"reachable {report.reachable}, kept young unreachable {report.kept_recent}, {verb} {report.pruned}; "
        + (
            f"would pack {report.packed}"
            if dry_run
            else f"packed {report.packed} into {report.pack or 'no pack'}, "
            f"removed {plural(report.packs_removed, 'pack')} and {plural(report.loose_removed, 'loose file')}"
        )
    )
    if report.damaged_skipped:
        damaged = plural(len(report.damaged_skipped), "damaged unreachable object")
        lines.append(f"left {damaged} unpacked; see reel fsck")
    # The JSON document (every pruned id, sorted, in hex: most of a large gc's report) only when asked for.
    doc = {**report.to_json(), "stale_locks_removed": [str(c.path) for c in cleared]} if ctx.json else None
    ctx.emit(doc, "\n".join(cleared_lines + lines))


COMMANDS = [gc]
