"""Issue 11's byte-flip sweep, exhaustive: every byte of every ref, reflog, journal entry,
config and verb-log file of the sweep store (tests/helpers/flipsweep.py), each XORed with each mask, and every
`--stride`-th byte of its packs, indexes and other loose objects.

    python3 bench/bench_flips.py [--masks 01,20,80] [--stride 97] [--kinds loose-ref,reflog,...]

For each flip, on a fresh copy of the store, `fsck`, `ops`, `recover` and `ops` run in-process and the
loopback target's ledger says what was sent. A flip is *caught* (some verb exits 3 with E007),
*refused* (another clear error, nothing sent), *harmless* (every answer and every send as without the
flip) or *bad* (a traceback, an effect re-sent, dropped or mis-reported). Prints one row per file kind
and every bad flip; exits 1 if there is any.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "helpers"))

import flipsweep  # noqa: E402
from target import Target  # noqa: E402

EXHAUSTIVE = ("loose-ref", "reflog", "journal", "config", "verb-log")
SAMPLED = ("pack", "idx", "loose")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--masks", default="01,20,80", help="XOR masks in hex, comma-separated")
    ap.add_argument("--stride", type=int, default=97, help="every Nth byte of packs, indexes, loose objects")
    ap.add_argument("--kinds", default=",".join(EXHAUSTIVE + SAMPLED))
    args = ap.parse_args()
    flipsweep.FLIPS = tuple(int(m, 16) for m in args.masks.split(","))
    wanted = args.kinds.split(",")
    with tempfile.TemporaryDirectory(prefix="reel-flips-") as tmp, Target(Path(tmp) / "ledger.jsonl") as target:
        template = flipsweep.build(Path(tmp) / "store", target)
        files = flipsweep.kinds(template)
        scratch = Path(tmp) / "scratch"
        base = flipsweep.baseline(template, scratch, target)
        start = time.perf_counter()
        todo = []
        for kind in wanted:
            stride = 1 if kind in EXHAUSTIVE else args.stride
            todo += list(flipsweep.flips({kind: files[kind]}, template, stride=stride))
        result = flipsweep.run(template, scratch, target, iter(todo), base)
        took = time.perf_counter() - start
    print(result.table())
    print(
        f"{len(todo)} flips in {took:.0f} s ({1000 * took / max(len(todo), 1):.0f} ms each); masks {args.masks}; "
        f"packs, indexes and loose objects every {args.stride}th byte"
    )
    for line in result.bad:
        print("BAD", line)
    return 1 if result.bad else 0


if __name__ == "__main__":
    sys.exit(main())
