"""Eight real processes race compare-and-swap increments on one ref: no update is ever lost."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from reelstore.backend.repo import Repo
from reelstore.objects import Blob

WORKER = r"""
import random, sys, time
from reelstore.errors import Conflict
from reelstore.objects import Blob
from reelstore.backend.repo import Repo

repo = Repo.open(sys.argv[1])
name, increments = sys.argv[2], int(sys.argv[3])
retries = 0
for _ in range(increments):
    for attempt in range(20000):
        current = repo.refs[name]
        counter = int(repo.objects.get(current).data)
        new = repo.objects.put(Blob(b"%d" % (counter + 1)))
        try:
            repo.refs.set(name, new, current, message="increment")
            break
        except Conflict:
            retries += 1
            time.sleep(random.random() / 1000)
    else:
        sys.exit("gave up after 20000 attempts")
print(retries)
"""

PROCS = 8
INCREMENTS = 25


def test_racing_cas_increments_lose_nothing(tmp_path: Path):
    repo = Repo.init(tmp_path)
    repo.config.set("core.fsync", "false")
    name = "refs/heads/counter"
    repo.refs.set(name, repo.objects.put(Blob(b"0")), None)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(tmp_path), name, str(INCREMENTS)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for _ in range(PROCS)
    ]
    results = [p.communicate(timeout=120) for p in procs]
    for p, (_out, err) in zip(procs, results):
        assert p.returncode == 0, err.decode()
    final = Repo.open(tmp_path)
    assert final.objects.get(final.refs[name]).data == b"%d" % (PROCS * INCREMENTS)
    log = final.refs.reflog(name)
    assert len(log) == PROCS * INCREMENTS + 1
    values = [int(final.objects.get(e.new).data) for e in log]
    assert values == list(range(PROCS * INCREMENTS + 1))
    assert all(a.new == b.old for a, b in zip(log, log[1:]))
    assert not list((tmp_path / ".reel" / "refs").rglob("*.lock"))
