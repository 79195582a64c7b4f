"""The deterministic simulation: 2,000 seeds hold every invariant, a seed replays exactly, and the
invariants have teeth (an unsafe recovery that forgets the journal is caught, and so is a target that
acted but is reported not sent)."""

from __future__ import annotations

from reelstore.adapters.base import Result
from reelstore.drain import journal as drainlog
from reelstore.sim.batch import run_many
from reelstore.sim.run import Run, run_seed
from reelstore.sim.world import World

SEEDS = 2000


def test_two_thousand_seeds_hold_every_invariant() -> None:
    summary = run_many(SEEDS)
    shown = [(f.seed, f.violations[:2]) for f in summary.failures[:5]]
    assert not summary.failures, f"{summary.counts['failed-seeds']} seeds failed, e.g. {shown}"
    assert summary.seeds == SEEDS
    for fault in (
        "crash",
        "zombie",
        "fenced",
        "race-commit",
        "race-abort",
        "lost-request",
        "lost-response",
        "object-write-torn",
        "ref-write-lost",
        "operator-finding",
        "zombie-keyed",
        "zombie-queryable",
        "zombie-two-phase",
        "zombie-blind",
        "not-sent",
        "not-sent-raised",
        "not-sent-local",
    ):
        assert summary.counts[fault] > 0, f"no seed exercised {fault}"


def test_a_seed_replays_exactly() -> None:
    for seed in (3, 77, 1234):
        first, second = run_seed(seed), run_seed(seed)
        assert first.events == second.events and first.counts == second.counts
    assert run_seed(3).events != run_seed(4).events


class ForgetfulRun(Run):
    """Unsafe on purpose: loses the drain journal before the calm recovery."""

    def calm(self) -> None:
        if self.repo.refs.get("refs/drains/main") is not None:
            self.repo.refs.delete("refs/drains/main")
            self.repo.files.remove(drainlog.mark_name("main"))  # and the mark that would report it missing
        super().calm()


def test_negative_control_a_forgotten_journal_is_caught() -> None:
    caught = [v for seed in range(200) for v in ForgetfulRun(seed).run().violations if "times" in v]
    assert caught, "forgetting the journal must make some effect reach its target twice"


class LyingWorld(World):
    """Unsafe on purpose: now and then the target acts, yet the attempt is reported not sent."""

    def deliver(self, tier: str, op_id: str, payload: str) -> Result:
        result = super().deliver(tier, op_id, payload)
        if result.state == "succeeded" and self.rates.lost_request and self.rng.random() < 0.3:
            return Result("not_sent", note="a lie")
        return result


def test_negative_control_a_false_not_sent_is_caught() -> None:
    caught = []
    for seed in range(200):
        run = Run(seed)
        run.world.__class__ = LyingWorld
        caught += [v for v in run.run().violations if "not_sent" in v or "times" in v]
    assert caught, "an effect reported not sent after the target acted must be caught"
