"""`reel snapshot`: keep a view's state (namespace, capabilities, pending effects) under a name."""

from __future__ import annotations

import click

from reelstore.cli.complete import SNAPSHOTS, VIEWS
from reelstore.cli.context import Context, pass_ctx
from reelstore.kernel import snapshot as snapshots


@click.command("snapshot")
@click.option("--list", "listing", is_flag=True, help="List the snapshots.")
@click.option("-d", "--delete", "delete", metavar="NAME", shell_complete=SNAPSHOTS, help="Delete snapshot NAME.")
@click.option("-f", "--force", is_flag=True, help="Move an existing snapshot NAME to the view's current state.")
@click.argument("view", required=False, shell_complete=VIEWS)
@click.argument("name", required=False)
@pass_ctx
def snapshot(ctx: Context, listing: bool, delete: str | None, force: bool, view: str | None, name: str | None) -> None:
    """Snapshot VIEW as NAME (default: the view's name): `refs/snapshots/NAME` at the view's object."""
    if sum((listing, delete is not None, view is not None)) != 1:
        raise click.UsageError("give VIEW [NAME], or --list, or --delete NAME")
    if listing:
        rows = snapshots.list_snapshots(ctx.repo)
        ctx.emit(
            {"snapshots": [s.to_json() for s in rows]},
            "\n".join(f"{s.name}\t{s.id.hex()[:12]}\tof view {s.view}" for s in rows),
        )
        return
    if delete is not None:
        old = snapshots.delete(ctx.repo, delete)
        ctx.emit({"deleted": delete, "id": old.hex()}, f"deleted snapshot {delete} (was {old.hex()[:12]})")
        return
    assert view is not None
    snap = snapshots.take(ctx.repo, view, name, force=force)
    ctx.emit(snap.to_json(), f"snapshot {snap.name} of view {view} at {snap.id.hex()[:12]}")


COMMANDS = [snapshot]
