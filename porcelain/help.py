"""`reel help [TOPIC]`: a command's help, or `reel help errors`: every error code, its exit status,
meaning and next action (the same table as docs/errors.md)."""

from __future__ import annotations

import click

from reelstore.cli.context import Context, pass_ctx
from reelstore.errors import NotFound, catalogue, meaning, table

TOPICS = ("errors",)


@click.command("help")
@click.argument("topic", required=False)
@pass_ctx
@click.pass_context
def help_(cctx: click.Context, ctx: Context, topic: str | None) -> None:
    """Show help on TOPIC: `errors` (every E-code with its exit status, meaning and next action) or a
    command name (the same as `reel COMMAND --help`); with no TOPIC, the list of commands."""
    group = cctx.parent.command if cctx.parent is not None else None
    if topic == "errors":
        rows = [
            {"code": c.code, "exit": c.exit_status, "name": c.__name__, "meaning": meaning(c), "next_action": c.hint}
            for c in catalogue()
        ]
        ctx.emit(rows, table())
        return
    if not isinstance(group, click.Group) or cctx.parent is None:
        raise NotFound("no command group to describe")
    if topic is None:
        click.echo(group.get_help(cctx.parent))
        return
    command = group.get_command(cctx.parent, topic)
    if command is None:
        raise NotFound(f"no command or help topic named {topic!r}; topics: {', '.join(TOPICS)}")
    with click.Context(command, info_name=topic, parent=cctx.parent) as sub:
        click.echo(command.get_help(sub))


COMMANDS = [help_]
