"""Drain overhead per effect, and simulation throughput.

    python3 bench/bench_drain.py [--effects N] [--sim-seeds N]

Drain: N http effects of one record are drained against a no-op loopback target, on a disk store
with fsync on (and once with fsync off). Per effect, the overhead is its drain time (journal intent,
token, send, journal outcome) minus the time the HTTP request itself took; median and p99 are printed
(target: ≤ 1 ms per effect with fsync). An effect's time runs from one send to the next: it includes
writing its outcome and the next intent, which share one ref update. For scale, dulwich writes the same
durable steps (an object and a compare-and-swap of a ref, twice per effect) on the same disk.
Simulation: seeds per second of `reel sim` and the faults injected.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from dulwich.objects import Blob as GitBlob
from dulwich.repo import Repo as GitRepo

from reelstore import crashpoints
from reelstore.adapters.base import register
from reelstore.adapters.http import HttpAdapter
from reelstore.backend.repo import Repo
from reelstore.drain.drainer import drain
from reelstore.objects import Effect, Effects, Record
from reelstore.sim.batch import run_many

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import Table, fresh_dir  # noqa: E402


class NoOp(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *_: object) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()


NETWORK: list[float] = []
FSYNCS = [0]
_fsync = os.fsync


def counting_fsync(fd: int) -> None:
    FSYNCS[0] += 1
    _fsync(fd)


os.fsync = counting_fsync


@register
class TimedHttp(HttpAdapter):
    """The real http adapter, timing the request itself so the drain's own cost can be separated."""

    name = "timed-http"

    def _request(self, method, url, headers, body, **kw):  # noqa: ANN001, ANN003, ANN202
        start = time.perf_counter()
        try:
            return super()._request(method, url, headers, body, **kw)
        finally:
            NETWORK.append(time.perf_counter() - start)


def drain_overhead(base: Path, url: str, n: int, fsync: bool) -> tuple[list[float], list[float], float]:
    repo = Repo.init(fresh_dir(base, f"store-{fsync}"))
    repo.config.set("core.fsync", "true" if fsync else "false")
    repo = Repo.open(repo.path)
    head = repo.refs["refs/heads/main"]
    effects = [
        Effect(
            "timed-http", "C", f"http:POST:{url}/x", {"method": "POST", "url": f"{url}/x", "json": {"n": i}}, "keyed"
        )
        for i in range(n)
    ]
    block = Effects(tuple(e.id for e in effects))
    rec = Record(head, repo.objects.get(head).namespace, block.id, message="bench")
    repo.objects.put_many([*effects, block, rec])
    repo.refs.set("refs/heads/main", rec.id, head)
    marks: list[float] = []

    def mark(point: str) -> None:
        if point == "drain:before-send":
            marks.append(time.perf_counter())

    NETWORK.clear()
    FSYNCS[0] = 0
    with crashpoints.hooked(mark):
        report = drain(repo, "main", rec.id)
    assert report.complete, report.to_json()
    totals = [b - a for a, b in zip(marks, marks[1:])]
    return totals, [t - net for t, net in zip(totals, NETWORK)], FSYNCS[0] / n


def dulwich_two_durable_steps(base: Path, n: int) -> list[float]:
    repo = GitRepo.init(str(fresh_dir(base, "git")), mkdir=False)
    times, old = [], None
    for i in range(n):
        start = time.perf_counter()
        for k in range(2):
            blob = GitBlob.from_string(f"journal {i} {k}".encode())
            repo.object_store.add_object(blob)
            repo.refs.set_if_equals(b"refs/drains/main", old, blob.id)
            old = blob.id
        times.append(time.perf_counter() - start)
    return times


def p99(xs: list[float]) -> float:
    return sorted(xs)[min(len(xs) - 1, int(len(xs) * 0.99))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--effects", type=int, default=300)
    parser.add_argument("--sim-seeds", type=int, default=2000)
    args = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", 0), NoOp)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    table = Table(f"drain, {args.effects} keyed http effects to a no-op loopback target (per effect)")
    fsyncs = {}
    for where in (None, "/dev/shm"):
        disk = "disk" if where is None else "tmpfs"
        if where is not None and not Path(where).is_dir():
            continue
        base = Path(tempfile.mkdtemp(prefix="reelbench-drain-", dir=where))
        try:
            for fsync in (True, False):
                totals, overhead, fsyncs[(disk, fsync)] = drain_overhead(base, url, args.effects, fsync)
                label = f"{disk}, fsync {'on' if fsync else 'off'}"
                git_like = dulwich_two_durable_steps(base, args.effects) if fsync else None
                table.add(
                    f"drain overhead median, {label}",
                    statistics.median(overhead),
                    None,
                    statistics.median(git_like) if git_like else None,
                )
                table.add(f"drain overhead p99, {label}", p99(overhead), None, p99(git_like) if git_like else None)
                table.add(f"whole effect median (incl. HTTP), {label}", statistics.median(totals))
        finally:
            shutil.rmtree(base, ignore_errors=True)
    server.shutdown()
    table.print()
    print("  (dulwich column: an object write + a ref compare-and-swap, twice per effect)")
    print(
        "  fsync calls per effect: "
        + ", ".join(f"{d} fsync {'on' if f else 'off'}: {n:.1f}" for (d, f), n in fsyncs.items())
    )
    summary = run_many(args.sim_seeds)
    print(
        f"== simulation: {summary.seeds} seeds in {summary.seconds:.1f}s = {summary.per_second:.0f} seeds/s, "
        f"{summary.counts.get('failed-seeds', 0)} failed"
    )
    print("  " + ", ".join(f"{k} {v}" for k, v in sorted(summary.counts.items())))
    for f in summary.failures[:5]:
        print(f"  seed {f.seed}: {f.violations[0]}")


if __name__ == "__main__":
    main()
