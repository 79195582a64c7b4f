"""`reel fsck`: verify every object, pack and hash chain; exit 3 naming the damage."""

from __future__ import annotations

import click

from reelstore.cli.context import Context, pass_ctx
from reelstore.cli.progress import progress_for, progress_options
from reelstore.errors import StorageError
from reelstore.maintenance.fsck import fsck as do_fsck
from reelstore.wording import plural


@click.command("fsck")
@click.option(
    "--full/--connectivity-only",
    default=True,
    show_default=True,
    help="Also verify every pack byte by byte (trailers, index, every entry), as git's default.",
)
@click.option("--unreachable", is_flag=True, help="List objects that no ref or young reflog entry reaches.")
@progress_options
@pass_ctx
def fsck(ctx: Context, full: bool, unreachable: bool) -> None:
    """Re-hash every object, check packs, walk from every ref and reflog, check record and journal chains."""
    repo = ctx.repo
    with progress_for(ctx) as progress:
        report = do_fsck(repo, full=full, progress=progress.count if progress else None)
    lines = list(report.problems)
    if unreachable:
        for h in report.unreachable:
            try:
                kind = repo.objects.get(h).kind
            except StorageError:
                kind = "damaged"
            lines.append(f"unreachable {kind} {h.hex()}")
    stale = repo.refs.stale_locks()
    lines += [f"stale lock {lock.describe()}: remove it with `reel gc --clear-stale-locks`" for lock in stale]
    doc = report.to_json()
    doc["stale_locks"] = [
        {"path": str(lock.path), "holder": lock.holder(), "age": round(lock.age), "dead": lock.dead} for lock in stale
    ]
    if not unreachable:
        doc.pop("unreachable")
    ctx.emit(doc, "\n".join(lines))
    if not report.clean:
        found = report.problems
        raise StorageError(f"fsck found {plural(len(found), 'problem')}; first: {found[0]}", problems=len(found))
    if not ctx.json and not ctx.quiet:
        click.echo(
            f"checked {plural(report.objects, 'object')} ({report.loose} loose, {report.packed} in "
            f"{plural(report.packs, 'pack')}), {report.reachable} reachable: ok",
            err=True,
        )


COMMANDS = [fsck]
