"""`reel remote`: name the git remotes this store syncs with."""

from __future__ import annotations

import click

from reelstore.cli.complete import REMOTES, TRUNKS
from reelstore.cli.context import Context, pass_ctx


@click.group("remote", invoke_without_command=True)
@click.option("-v", "--verbose", is_flag=True, help="With no subcommand: show URLs too.")
@click.pass_context
def remote(click_ctx: click.Context, verbose: bool) -> None:
    """Add, rename, remove or list remotes, or print one's URL (with no subcommand: list)."""

    if click_ctx.invoked_subcommand is None:
        click_ctx.invoke(list_cmd, verbose=verbose)


@remote.command("add")
@click.argument("name")
@click.argument("url")
@click.option(
    "--track", is_flag=True, help="Make the store's trunk track NAME: its commits then default to --remote NAME."
)
@click.option(
    "--trunk",
    "trunks_opt",
    multiple=True,
    metavar="TRUNK",
    shell_complete=TRUNKS,
    help="With --track: track NAME from TRUNK instead (repeatable).",
)
@pass_ctx
def add(ctx: Context, name: str, url: str, track: bool, trunks_opt: tuple[str, ...]) -> None:
    """Record remote NAME at URL (a path, file://, git://, ssh:// or http(s)://)."""
    from reelstore import sync  # on use: it loads dulwich, which most commands never need

    if trunks_opt and not track:
        raise click.UsageError("--trunk needs --track")
    trunks = sorted(set(trunks_opt) or {ctx.repo.trunk}) if track else []
    sync.add_remote(ctx.repo, name, url, track=trunks)
    ctx.emit(
        {"name": name, "url": url, "tracked_by": trunks},
        "\n".join(f"trunk {t} tracks {name}: its commits default to --remote {name}" for t in trunks),
    )


@remote.command("remove")
@click.argument("name", shell_complete=REMOTES)
@click.option(
    "--force", is_flag=True, help="Remove it although live views are bound to it (they stay bound to the name)."
)
@pass_ctx
def remove(ctx: Context, name: str, force: bool) -> None:
    """Forget remote NAME, its remote-tracking refs and what this store knew of it; refused while live views
    are bound to it."""
    from reelstore import sync  # on use: it loads dulwich, which most commands never need

    deleted = sync.remove_remote(ctx.repo, name, force=force)
    ctx.emit({"name": name, "deleted_refs": deleted})


@remote.command("rename")
@click.argument("old", shell_complete=REMOTES)
@click.argument("new")
@pass_ctx
def rename(ctx: Context, old: str, new: str) -> None:
    """Rename remote OLD to NEW: its config, remote-tracking refs, sync state and the views bound to it."""
    from reelstore import sync  # on use: it loads dulwich, which most commands never need

    moved = sync.rename_remote(ctx.repo, old, new)
    ctx.emit({"old": old, "new": new, "moved_refs": moved})


@remote.command("get-url")
@click.argument("name", shell_complete=REMOTES)
@click.option("--push", "push_url", is_flag=True, help="The URL pushes go to (reel keeps one URL per remote).")
@pass_ctx
def get_url(ctx: Context, name: str, push_url: bool) -> None:
    """Print the URL of remote NAME."""
    from reelstore import sync  # on use: it loads dulwich, which most commands never need

    url = sync.remote_url(ctx.repo, name)
    ctx.emit({"name": name, "url": url}, url)


@remote.command("list")
@click.option("-v", "--verbose", is_flag=True, help="Show URLs too.")
@pass_ctx
def list_cmd(ctx: Context, verbose: bool = False) -> None:
    """List remote names (with -v, their URLs)."""
    from reelstore import sync  # on use: it loads dulwich, which most commands never need

    rows = sync.list_remotes(ctx.repo)
    ctx.emit(
        {"remotes": [{"name": n, "url": u} for n, u in rows]}, "\n".join(f"{n}\t{u}" if verbose else n for n, u in rows)
    )


COMMANDS = [remote]
