"""`reel mcp`: serve the store's verbs to an agent host over MCP (stdio, or streamable HTTP on loopback)."""

from __future__ import annotations

import click

from reelstore.cli.complete import TRUNKS
from reelstore.cli.context import Context, pass_ctx
from reelstore.extras import needs


@click.command("mcp")
@click.option("--trunk", metavar="TRUNK", shell_complete=TRUNKS,
              help="The trunk the agent's views fork from (default: core.trunk).")
@click.option("--cap", "caps", multiple=True, metavar="SPEC",
              help="Capability OPS=PREFIX[;expires=ISO-8601][;budget=N] bounding every view; repeatable. "
                   "Default: the trunk's.")
@click.option("--http", "http_port", type=click.IntRange(1, 65535), metavar="PORT",
              help="Serve streamable HTTP on 127.0.0.1:PORT (path /mcp) instead of stdio.")
@pass_ctx
def mcp(ctx: Context, trunk: str | None, caps: tuple[str, ...], http_port: int | None) -> None:
    """Run an MCP server whose tools fork, write, queue effects, commit and abort views of one trunk,
    never wider than --cap. Configure an agent host with the command `reel -C STORE mcp --cap …`."""
    needs("mcp", "mcp", "reel mcp")
    from reelstore.agents.mcp_server import build_server
    from reelstore.api import Store

    server = build_server(Store(ctx.repo), trunk, list(caps) or None, port=http_port or 8000)
    if http_port is None:
        server.run("stdio")
        return
    try:
        server.run("streamable-http")
    except KeyboardInterrupt:
        # uvicorn shuts down gracefully on the operator's Ctrl-C, then raises it again: a requested stop.
        return


COMMANDS = [mcp]
