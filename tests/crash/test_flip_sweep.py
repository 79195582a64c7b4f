"""Issue 11's byte-flip sweep, sampled for CI: flips in refs, reflogs, the journal
segment, config, the verb log, packs, indexes and loose objects of a store that owes one blind payment and must never
resend another. Every flip is caught (exit 3), refused with a clear error, or harmless; none re-sends,
drops or mis-reports an effect, none raises a traceback. bench/bench_flips.py runs every byte."""

from __future__ import annotations

from pathlib import Path

from flipsweep import baseline, build, kinds, run, sample
from target import Target


def test_sampled_byte_flips_are_caught_or_harmless(tmp_path: Path) -> None:
    with Target(tmp_path / "ledger.jsonl") as target:
        template = build(tmp_path / "store", target)
        files = kinds(template)
        assert all(files[k] for k in ("loose-ref", "reflog", "journal", "config", "pack", "idx", "loose")), files
        scratch = tmp_path / "scratch"
        base = baseline(template, scratch, target)
        todo = sample(files, template, per_kind=8)
        result = run(template, scratch, target, iter(todo), base)
    print(result.table())
    assert result.bad == [], "\n".join(result.bad[:20])
    assert sum(result.counts.values()) == len(todo) == 64
    for kind in ("loose-ref", "reflog", "journal", "pack", "idx", "loose"):
        assert result.counts[(kind, "caught")] == 8, result.table()
