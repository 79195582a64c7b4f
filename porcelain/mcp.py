"""`reel mcp`: serve the store's verbs to an agent host over MCP (stdio, or streamable HTTP on loopback)."""

from __future__ import annotations

import os
import secrets
import sys
from pathlib import Path

import click

from reelstore.cli.complete import TRUNKS
from reelstore.cli.context import Context, pass_ctx
from reelstore.errors import BadInput
from reelstore.extras import needs
from reelstore.kernel.history import MAX_LIMIT

TOKEN_ENV = "REEL_MCP_TOKEN"


def _token(token_file: Path | None) -> str:
    """The bearer token HTTP clients must present: --token-file, else $REEL_MCP_TOKEN, else a new random
    one printed on stderr for the operator to give the agent host."""
    if token_file is not None:
        try:
            token = token_file.read_text().strip()
        except OSError as exc:
            raise BadInput(f"--token-file {token_file}: {exc.strerror}") from None
        if not token:
            raise BadInput(f"--token-file {token_file} is empty")
        return token
    token = os.environ.get(TOKEN_ENV, "").strip()
    if token:
        return token
    token = secrets.token_urlsafe(32)
    print(f"reel mcp: bearer token (send `Authorization: Bearer TOKEN`): {token}", file=sys.stderr, flush=True)
    return token


@click.command("mcp")
@click.option(
    "--trunk",
    metavar="TRUNK",
    shell_complete=TRUNKS,
    help="The trunk the agent's views fork from (default: core.trunk).",
)
@click.option(
    "--cap",
    "caps",
    multiple=True,
    metavar="SPEC",
    help="Capability OPS=PREFIX[;expires=ISO-8601][;budget=N] bounding every view; repeatable. "
    "Its budget=N bounds EACH view the agent forks; to bound the whole server use "
    "--session-budget. Default: the trunk's.",
)
@click.option(
    "--session-budget",
    type=click.IntRange(0, MAX_LIMIT),
    metavar="N",
    help="At most N effects committed through this server in total, across all its views and sessions, until it stops.",
)
@click.option(
    "--propose-only",
    is_flag=True,
    help="No commit tool: the agent's tools end at `propose`; a person commits from the command line.",
)
@click.option(
    "--http",
    "http_port",
    type=click.IntRange(1, 65535),
    metavar="PORT",
    help="Serve streamable HTTP on 127.0.0.1:PORT (path /mcp) instead of stdio; every request needs "
    f"the bearer token (--token-file, ${TOKEN_ENV}, or one printed on stderr).",
)
@click.option(
    "--token-file",
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="FILE",
    help="With --http: the bearer token, read from FILE.",
)
@pass_ctx
def mcp(
    ctx: Context,
    trunk: str | None,
    caps: tuple[str, ...],
    session_budget: int | None,
    propose_only: bool,
    http_port: int | None,
    token_file: Path | None,
) -> None:
    """Run an MCP server whose tools fork, write, queue effects, commit and abort views of one trunk,
    never wider than --cap. Configure an agent host with the command `reel -C STORE mcp --cap …`."""
    needs("mcp", "mcp", "reel mcp")
    from reelstore.agents.mcp_server import build_server, serve_http
    from reelstore.api import Store

    if token_file is not None and http_port is None:
        raise BadInput("--token-file is for --http: a stdio server is reached only through its own pipes")
    server = build_server(
        Store(ctx.repo),
        trunk,
        list(caps) or None,
        port=http_port or 8000,
        session_budget=session_budget,
        propose_only=propose_only,
    )
    if http_port is None:
        server.run("stdio")
        return
    token = _token(token_file)
    try:
        serve_http(server, token)
    except KeyboardInterrupt:
        # uvicorn shuts down gracefully on the operator's Ctrl-C, then raises it again: a requested stop.
        return


COMMANDS = [mcp]
