"""Fairness of `commit --remote --retry`: W processes, each its own clone of one bare git repository,
each commit C views (one file each) to the shared trunk with retry=R.

    python3 bench/bench_commit_retry.py [--workers W] [--commits C] [--retry R] [--pause P]

Prints, per worker, the tries its commits took (1 = won at once), in order and summed up. Workers
here commit back to back with no pause between commits, the hardest case for fairness: the store that
won last needs no fetch before its next try, so it has an edge over the stores that are catching up.
`--pause P` gives each worker up to P seconds of other work before each commit, as an agent has.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import git_init, scratch  # noqa: E402

from reelstore import sync  # noqa: E402
from reelstore.api import Store  # noqa: E402

_WORKER = """
import json, random, sys, time
from reelstore.api import Store
from reelstore.kernel import verbs as kernel
from reelstore.sync import remote_fence
from reelstore.sync.retry import retrying
store = Store.open(sys.argv[1])
worker, commits, retries, pause = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
tries = []
for n in range(commits):
    time.sleep(random.uniform(0, pause))
    name = f"{worker}-{n}"
    store.fork(name).put(f"{worker}/{n}.txt", name)
    fence = remote_fence(store.repo, "origin")
    lost: list[str] = []
    retrying(store.repo, "origin", retries, lambda: kernel.commit(store.repo, name, fence=fence), lost=lost)
    tries.append(len(lost) + 1)
print(json.dumps(tries))
"""


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--commits", type=int, default=25)
    ap.add_argument("--retry", type=int, default=100)
    ap.add_argument("--pause", type=float, default=0.0, help="seconds of work (uniform 0..P) before each commit")
    args = ap.parse_args()
    env = {k: v for k, v in os.environ.items() if k != "REEL_DIR"}
    with scratch("reelbench-retry-") as tmp:
        remote = git_init(tmp / "shared.git")
        first = Store.init(tmp / "first")
        sync.add_remote(first.repo, "origin", str(remote))
        sync.push(first.repo, "origin")
        dirs = []
        for k in range(args.workers):
            sync.clone(str(remote), tmp / f"w{k}")
            dirs.append(tmp / f"w{k}")
        start = time.perf_counter()
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", _WORKER, str(d), f"w{k}", str(args.commits), str(args.retry), str(args.pause)],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            for k, d in enumerate(dirs)
        ]
        results = []
        for p in procs:
            out, err = p.communicate(timeout=3600)
            if p.returncode:
                print(err.decode(), file=sys.stderr)
                return 1
            results.append(json.loads(out))
        took = time.perf_counter() - start
        total = args.workers * args.commits
        print(
            f"{args.workers} workers x {args.commits} commits, retry={args.retry}, pause<={args.pause}s: "
            f"{total} landed in {took:.1f}s ({total / took:.1f} commits/s)"
        )
        print("worker  won-at-once  mean-tries  max-tries  total-tries")
        for k, tries in enumerate(results):
            print(
                f"w{k:<6} {sum(1 for t in tries if t == 1):>11}  {statistics.mean(tries):>10.2f}  "
                f"{max(tries):>9}  {sum(tries):>11}"
            )
        for k, tries in enumerate(results):
            print(f"w{k} tries in order: {tries}")
        every = [t for tries in results for t in tries]
        print(
            f"all     {sum(1 for t in every if t == 1):>11}  {statistics.mean(every):>10.2f}  {max(every):>9}  "
            f"{sum(every):>11}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
