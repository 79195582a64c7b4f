"""`reel drain --worker`: drain a shared Postgres store's outbox as one worker of a fleet."""

from __future__ import annotations

import signal
from types import FrameType
from typing import TYPE_CHECKING

import click

from reelstore.cli.context import Context, pass_ctx
from reelstore.errors import BadInput, CapabilityViolation, StaleEpoch

if TYPE_CHECKING:
    from reelstore.fleet.worker import Drained, WorkerReport


def _stop(_signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt


@click.command("drain")
@click.option("--worker", is_flag=True, help="Run as a drain worker (the one mode there is).")
@click.option("--once", is_flag=True, help="Drain what is claimable now, then exit.")
@click.option(
    "--lease",
    default=None,
    metavar="SECONDS",
    help="How long a claim holds an effect (default: config drain.lease, else 30); a dead worker's "
    "effects are taken over after it.",
)
@click.option("--name", default=None, help="This worker's name in the outbox (default HOST:PID).")
@click.option("--trunk", default=None, help="Drain only this trunk's effects.")
@pass_ctx
def drain(ctx: Context, worker: bool, once: bool, lease: str | None, name: str | None, trunk: str | None) -> None:
    """Claim owed effects of a shared (Postgres) store with a lease, journal each intent, send, settle;
    take over effects whose worker's lease ran out (keyed resent, queryable asked, blind parked
    unknown). Without --once it waits for commits until SIGINT/SIGTERM. Exit 6 (E016) if another
    worker took over this one's effect."""
    if not worker:
        raise BadInput(
            "`reel drain` runs a drain worker: give --worker (and --once to drain what is owed now and exit)",
            field="worker",
        )

    from reelstore.fleet.worker import work  # loads the Postgres client (E014 naming the extra without it)

    def show(report: WorkerReport, done: Drained) -> None:
        click.echo(report.line(done))

    signal.signal(signal.SIGTERM, _stop)
    rep = work(ctx.repo, once=once, lease_s=lease, name=name, trunk=trunk, progress=None if ctx.json else show)
    ctx.emit(rep.to_json(), rep.summary())
    if rep.fenced is not None:
        raise StaleEpoch(rep.fenced)
    if rep.refused is not None:
        raise CapabilityViolation(rep.refused)


COMMANDS = [drain]
