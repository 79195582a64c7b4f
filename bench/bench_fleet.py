"""A fleet on one trunk: commits per second and effects drained per second with 1, 4 and 16 processes.

    python3 bench/bench_fleet.py [--commits N] [--rounds R] [--sizes 1,4,16]

For each size n, interleaved round by round, on one private PostgreSQL server (tests/helpers/pg_server.py) and a
no-op loopback HTTP target:
- floor: n processes each running `INSERT ... ; COMMIT` in a loop on the same server (the least any
  commit there can cost);
- pg: n processes committing one view each time (one keyed http effect) to one shared store (`reel init
  --backend`), `drain.onCommit = workers`, while n `reel drain --worker` processes send the effects;
  commits/s is over the committers' wall time, effects/s from the first commit until the outbox is empty;
- disk: n processes committing to one local disk store, each commit draining its own effect (as today);
- drain: n workers draining an outbox already holding N effects (committed first, no worker running).
Every process imports and connects first; the loops start together, and wall time runs from the first
loop's start to the last one's end (pg effects/s: until the outbox is empty). Wall seconds are medians
over the rounds; CPU is the committing (or inserting) loops' user+system seconds in the median round:
neither the drain workers' nor the database server's. N commits per size in total, split over n.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "helpers"))
sys.path.insert(0, str(HERE))
from _util import scratch  # noqa: E402

PY = sys.executable
REEL = str(Path(sys.executable).parent / "reel")


class NoOp(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *_: object) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        # one write: headers and body apart would wait out the client's delayed ACK (~40 ms)
        self.wfile.write(b"HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\n{}")


def child(argv: list[str]) -> None:
    """One process of a run: `AT floor URL N`, or `AT commit DIR N TAG BASE`. It imports and connects
    first, starts its loop at time AT (so that no process's start-up is counted), and prints its loop's
    start, end and CPU seconds."""
    at, kind = float(argv[0]), argv[1]
    if kind == "floor":
        import psycopg

        url, n = argv[2], int(argv[3])
        conn = psycopg.connect(url)

        def loop() -> None:
            for i in range(n):
                conn.execute("INSERT INTO floor (v) VALUES (%s)", (i,))
                conn.commit()
    else:
        from reelstore.api import Store

        store_dir, n, tag, base = argv[2], int(argv[3]), argv[4], argv[5]
        store = Store.open(store_dir)
        store.repo.refs.get("refs/heads/main")  # connected

        def loop() -> None:
            for i in range(n):
                name = f"{tag}-{i}"
                store.fork(name).effect("http", {"method": "POST", "url": f"{base}/keyed/pay", "json": {"n": i}})
                for _ in range(100):  # a lost race on the trunk is retried (E002), as an agent would
                    try:
                        store.commit(name)
                        break
                    except Exception as exc:  # noqa: BLE001
                        if getattr(exc, "code", "") != "E002":
                            raise
                else:
                    raise SystemExit(f"commit {name} lost 100 races")

    time.sleep(max(0.0, at - time.time()))
    cpu, start = _self_cpu(), time.time()
    loop()
    print(json.dumps({"start": start, "end": time.time(), "cpu": _self_cpu() - cpu}))


def _self_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


START_DELAY_S = 3.0
"""Time every process of a run is given to import and connect before the loops start together."""


def _run(jobs: list[list[str]]) -> dict[str, float]:
    """Run the child processes of one measurement; the span from the first loop's start to the last
    one's end, and the loops' CPU seconds."""
    at = str(time.time() + START_DELAY_S + 0.1 * len(jobs))
    procs = [subprocess.Popen([PY, __file__, "--child", at, *job], stdout=subprocess.PIPE) for job in jobs]
    docs = []
    for p in procs:
        out, _ = p.communicate(timeout=900)
        if p.returncode != 0:
            raise SystemExit(f"a bench process exited {p.returncode}")
        docs.append(json.loads(out))
    return {
        "start": min(d["start"] for d in docs),
        "end": max(d["end"] for d in docs),
        "cpu": sum(d["cpu"] for d in docs),
    }


def floor(url: str, n: int, total: int) -> dict[str, float]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS floor (id bigserial PRIMARY KEY, v int, at timestamptz DEFAULT now())")
    got = _run([["floor", url, str(total // n)] for _ in range(n)])
    return {"commits": total // n * n, "commit_wall": got["end"] - got["start"], "cpu": got["cpu"]}


def _init(d: Path, base: str, backend: str | None) -> None:
    from reelstore.api import Store

    args = [REEL, "init", str(d)] + (["--backend", backend] if backend else [])
    subprocess.run(args, check=True, capture_output=True)
    repo = Store.open(d).repo
    repo.config.set("service.keyed.match", f"http:POST:{base}/keyed")
    repo.config.set("service.keyed.delivery", "keyed")
    if backend:
        repo.config.set("drain.onCommit", "workers")


def _workers(dirs: list[Path]) -> list[subprocess.Popen[bytes]]:
    """One `reel drain --worker` per directory (each a machine of the fleet)."""
    return [
        subprocess.Popen([REEL, "drain", "--worker", "--lease", "30"], cwd=d, stdout=subprocess.DEVNULL) for d in dirs
    ]


def _until_drained(conn: Any) -> None:
    """Poll the outbox until no row is left owed (bounded: at most 300 s)."""
    for _ in range(60000):
        row = conn.execute("SELECT count(*) FROM outbox WHERE state <> 'done'").fetchone()
        if row is not None and row[0] == 0:
            return
        time.sleep(0.005)


def _stop(workers: list[subprocess.Popen[bytes]]) -> None:
    for w in workers:
        w.terminate()
    for w in workers:
        w.wait(timeout=60)


def pg(url: str, root: Path, base: str, n: int, total: int, tag: str) -> dict[str, float]:
    import psycopg

    dirs = []
    for k in range(n):
        d = root / f"pg-{tag}-{k}"
        _init(d, base, url)
        dirs.append(d)
    workers = _workers(dirs)
    per = total // n
    got = _run([["commit", str(d), str(per), f"{tag}{k}", base] for k, d in enumerate(dirs)])
    with psycopg.connect(url, autocommit=True) as conn:
        _until_drained(conn)
    drained = time.time()
    _stop(workers)
    return {
        "commits": per * n,
        "commit_wall": got["end"] - got["start"],
        "drain_wall": drained - got["start"],
        "cpu": got["cpu"],
    }


def drain_only(url: str, root: Path, base: str, n: int, total: int, tag: str) -> dict[str, float]:
    """Effects drained/s by n workers from an outbox already full: `total` commits made first with no
    worker running, then n workers start; the span runs from the first intent to the last outcome, as
    the rows record them (so worker start-up is not counted)."""
    import psycopg

    d = root / f"pgd-{tag}"
    _init(d, base, url)
    _run([["commit", str(d), str(total), f"d{tag}", base]])
    dirs = []
    for k in range(n):
        w = root / f"pgd-{tag}-{k}"
        _init(w, base, url)
        dirs.append(w)
    workers = _workers(dirs)
    with psycopg.connect(url, autocommit=True) as conn:
        _until_drained(conn)
        span = conn.execute(
            "SELECT extract(epoch from max(updated)) - min((outcome->>'intent_ms')::bigint) / 1000.0 FROM outbox"
        ).fetchone()
        conn.execute("DELETE FROM outbox")
    _stop(workers)
    return {"commits": total, "commit_wall": float(span[0]) if span else 0.0, "cpu": 0.0}


def disk(root: Path, base: str, n: int, total: int, tag: str) -> dict[str, float]:
    d = root / f"disk-{tag}"
    _init(d, base, None)
    per = total // n
    got = _run([["commit", str(d), str(per), f"{tag}{k}", base] for k in range(n)])
    wall = got["end"] - got["start"]
    return {"commits": per * n, "commit_wall": wall, "drain_wall": wall, "cpu": got["cpu"]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--commits", type=int, default=160)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sizes", default="1,4,16")
    args = ap.parse_args()
    from pg_server import PgServer

    sizes = [int(s) for s in args.sizes.split(",")]
    server = ThreadingHTTPServer(("127.0.0.1", 0), NoOp)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    pgs = PgServer()
    runs: dict[tuple[str, int], list[dict[str, float]]] = {}
    try:
        with scratch("reelfleet-") as root:
            for r in range(args.rounds):
                for n in sizes:
                    url = pgs.fresh_url()
                    runs.setdefault(("floor", n), []).append(floor(url, n, args.commits))
                    runs.setdefault(("pg", n), []).append(pg(url, root, base, n, args.commits, f"r{r}n{n}"))
                    runs.setdefault(("disk", n), []).append(disk(root, base, n, args.commits, f"r{r}n{n}"))
                    runs.setdefault(("drain", n), []).append(
                        drain_only(pgs.fresh_url(), root, base, n, args.commits, f"r{r}n{n}")
                    )
                    print(f"round {r + 1}/{args.rounds}, {n} processes done", file=sys.stderr)
    finally:
        pgs.close()
        server.shutdown()
    print(f"{'store':<6} {'procs':>5} {'commits/s':>10} {'effects/s':>10} {'% floor':>8} {'wall s':>7} {'cpu s':>7}")
    out = []
    for n in sizes:
        floor_rate = 0.0
        for kind in ("floor", "pg", "disk", "drain"):
            rs = sorted(runs[(kind, n)], key=lambda x: x["commit_wall"])
            mid = rs[len(rs) // 2]
            wall = statistics.median(x["commit_wall"] for x in rs)
            rate = mid["commits"] / wall
            eff = mid["commits"] / statistics.median(x["drain_wall"] for x in rs) if kind in ("pg", "disk") else None
            if kind == "drain":  # effects drained from a full outbox: its rate is in the effects column
                eff, rate = rate, 0.0
            floor_rate = rate if kind == "floor" else floor_rate
            pct = f"{100 * rate / floor_rate:.1f}" if kind in ("pg", "disk") else "100" if kind == "floor" else "-"
            print(
                f"{kind:<6} {n:>5} {rate:>10.1f} {eff if eff is None else round(eff, 1)!s:>10} {pct:>8} "
                f"{wall:>7.2f} {mid['cpu']:>7.2f}"
            )
            out.append(
                {
                    "store": kind,
                    "procs": n,
                    "commits_per_s": rate,
                    "effects_per_s": eff,
                    "wall_s": wall,
                    "cpu_s": mid["cpu"],
                }
            )
    print(json.dumps(out), file=sys.stderr)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2:])
    else:
        os.environ.pop("REEL_DIR", None)
        main()
