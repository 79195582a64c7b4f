"""Many seeds: the CI run, the bench run and `reel sim`."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from reelstore.sim.run import SeedResult, run_seed


@dataclass
class Summary:
    start: int
    seeds: int = 0
    seconds: float = 0.0
    counts: Counter[str] = field(default_factory=Counter)
    failures: list[SeedResult] = field(default_factory=list)

    @property
    def per_second(self) -> float:
        return self.seeds / self.seconds if self.seconds else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "start": self.start,
            "seeds": self.seeds,
            "seconds": round(self.seconds, 3),
            "seeds_per_second": round(self.per_second, 1),
            "counts": dict(sorted(self.counts.items())),
            "failures": [{"seed": f.seed, "violations": f.violations} for f in self.failures],
        }


def run_many(count: int, start: int = 0, keep_failures: int = 20) -> Summary:
    """Run seeds start..start+count-1; every seed runs even after a failure (the first few are kept)."""
    summary = Summary(start)
    began = time.perf_counter()
    for seed in range(start, start + count):
        result = run_seed(seed)
        summary.seeds += 1
        summary.counts.update(result.counts)
        if not result.ok:
            summary.counts["failed-seeds"] += 1
            if len(summary.failures) < keep_failures:
                summary.failures.append(result)
    summary.seconds = time.perf_counter() - began
    return summary
