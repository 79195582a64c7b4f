"""`reel replay`: re-run a command against a recorded dry run's reads, offline, into a new view."""

from __future__ import annotations

import click

from reelstore.api import Store
from reelstore.backend.service_rules import model_origin
from reelstore.cli.context import Context, pass_ctx
from reelstore.intercept.loop import DryRun, default_backends
from reelstore.intercept.recording import ReplayProxy, recorded_model_origins, recording_of
from reelstore.porcelain.run import BeforeDashDash, check_decision_flags, execute_and_decide, needs_interception
from reelstore.wording import plural


class _Replay(BeforeDashDash):
    positionals = 1


@click.command(
    "replay", cls=_Replay, context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False}
)
@click.option("--view", "view", metavar="NAME", help="Name of the replay's view (default: run-<time>-<hex>).")
@click.option("--commit", "do_commit", is_flag=True, help="Commit a clean replay without asking.")
@click.option("--abort", "do_abort", is_flag=True, help="Abort the replay's view after showing what it holds.")
@click.option("--keep", is_flag=True, help="Leave the replay's view live (to `reel diff` it against the recording).")
@click.option("--allow-live", is_flag=True, help="Fetch a read the recording lacks from the network (reported).")
@click.option(
    "--allow",
    "allow",
    multiple=True,
    metavar="HOST:PORT",
    help="With --allow-live: a loopback target the command may reach, through the proxy only.",
)
@click.option(
    "--live-models",
    is_flag=True,
    help="Send model calls to the model; every other read still comes from the recording.",
)
@click.option(
    "--model",
    "models",
    multiple=True,
    metavar="ORIGIN",
    help="With --live-models: a local model server to send them to (the recorded ones are known).",
)
@click.option(
    "--dir",
    "prefix",
    default="",
    metavar="PREFIX",
    help="Scratch directory holds, and takes back, only names under PREFIX.",
)
@click.option("-m", "--message", default="", help="Record message (default: reel run: CMD).")
@click.option("--force", is_flag=True, help="With --commit: commit even if something was refused or diverged.")
@click.option(
    "--no-sandbox",
    "no_sandbox",
    is_flag=True,
    help="Run without a network namespace: a client that ignores the proxy can reach the network.",
)
@click.argument("source")
@click.argument("cmd", nargs=-1, type=click.UNPROCESSED)
@pass_ctx
def replay(
    ctx: Context,
    view: str | None,
    do_commit: bool,
    do_abort: bool,
    keep: bool,
    allow_live: bool,
    allow: tuple[str, ...],
    live_models: bool,
    models: tuple[str, ...],
    prefix: str,
    message: str,
    force: bool,
    no_sandbox: bool,
    source: str,
    cmd: tuple[str, ...],
) -> None:
    """Run CMD with its reads answered from SOURCE's recording (a view or a record made by
    `reel run --record`), in order and with no network; its effects go into a new view of the same
    trunk. A read the recording does not hold is a divergence: reported, and the run is unclean.
    Model calls are answered from the recording too (zero requests to the model), unless
    --live-models; a changed prompt is a divergence showing the diff of its messages."""
    needs_interception("reel replay")
    if cmd[:1] == ("--",):  # options end at SOURCE, so a `--` after it arrives as the first word
        cmd = cmd[1:]
    if not cmd:
        raise click.UsageError("missing the command to replay (reel replay [OPTIONS] SOURCE -- CMD...)")
    check_decision_flags(do_commit, do_abort, keep, force)
    recording, _, trunk = recording_of(ctx.repo, source)
    models = (*(model_origin(m) for m in models), *recorded_model_origins(recording))
    proxy = lambda repo, v: ReplayProxy(repo, v, recording, allow, allow_live, models, live_models)  # noqa: E731
    backends = default_backends(prefix, allow, sandbox=not no_sandbox, proxy=proxy, models=models)
    loop = DryRun(Store(ctx.repo), cmd, view, trunk, None, backends)
    loop.notes.append(f"replaying {plural(len(recording.entries), 'recorded read')} of {source}")
    execute_and_decide(ctx, loop, do_commit, do_abort, force, message, no_sandbox, keep)


COMMANDS = [replay]
