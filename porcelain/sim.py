"""`reel sim`: the deterministic simulation of the kernel and its drain under faults."""

from __future__ import annotations

import click

from reelstore.cli.context import Context, pass_ctx
from reelstore.kernel.history import MAX_LIMIT
from reelstore.sim.batch import Summary, run_many
from reelstore.sim.run import run_seed
from reelstore.wording import plural


def _fail(message: str) -> None:
    """A broken invariant is a plain failure (exit 1), not one of the store's refusals."""
    click.echo(f"error: {message}", err=True)
    raise SystemExit(1)


def _text(s: Summary) -> str:
    lines = [
        f"{s.seeds} seeds from {s.start} in {s.seconds:.1f}s ({s.per_second:.0f} seeds/s), "
        f"{s.counts.get('failed-seeds', 0)} failed"
    ]
    lines.append("faults and events: " + ", ".join(f"{k} {v}" for k, v in sorted(s.counts.items())))
    for f in s.failures:
        lines.append(f"seed {f.seed}: {'; '.join(f.violations[:3])} (reproduce: reel sim --seed {f.seed})")
    return "\n".join(lines)


@click.command("sim")
@click.option(
    "--seeds", type=click.IntRange(1, 10_000_000), default=1000, show_default=True, help="How many seeds to run."
)
@click.option("--start", type=click.IntRange(0, MAX_LIMIT), default=0, show_default=True, help="First seed.")
@click.option("--seed", type=click.IntRange(0, MAX_LIMIT), default=None, help="Replay one seed, printing its trace.")
@pass_ctx
def sim(ctx: Context, seeds: int, start: int, seed: int | None) -> None:
    """Run seeded simulations (crashes at every step, lost requests and answers, zombie drainers,
    torn writes, concurrent committers, aborts racing commits) and check the invariants after each.
    Exits 1 if any seed breaks one."""
    if seed is not None:
        result = run_seed(seed)
        ctx.emit(
            result.to_json(),
            lambda: "\n".join(
                result.events + [f"violation: {v}" for v in result.violations] + [f"counts: {dict(result.counts)}"]
            ),
        )
        if not result.ok:
            _fail(f"seed {seed} broke {plural(len(result.violations), 'invariant')}")
        return
    summary = run_many(seeds, start)
    ctx.emit(summary.to_json(), lambda: _text(summary))
    if summary.failures:
        _fail(f"{summary.counts['failed-seeds']} of {summary.seeds} seeds broke an invariant")


COMMANDS = [sim]
