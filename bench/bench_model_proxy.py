"""What `reel run` adds to an LLM agent's model calls: latency per call and time to the first streamed token.

    python3 bench/bench_model_proxy.py [--calls N] [--rounds N] [--hold-ms MS] [--plain-http] [--no-sandbox]

A loopback model server (tests/helpers/model_server.py: OpenAI chat-completions, its own CA, HTTPS unless
--plain-http) answers a client that makes N plain calls and N streamed calls with httpx (the `openai`
SDK's transport), timing each: a plain call end to end, and a streamed call to its first content event
(the server holds the rest back --hold-ms, so the first token is apart from the end). The same client
runs directly and under `reel run --abort --model ORIGIN` (sandbox, proxy, verified TLS both ways),
alternating round by round so that load on the machine falls on both alike. Printed: p50 and p99 of
each, direct and under reel run, and their differences (the goal is <= 2 ms added per call at p50).
No --record: recording adds a store write per call at the end of the run, not per call.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "helpers"))

from model_server import ModelServer  # noqa: E402

CLIENT = r"""
import json, sys, time
import httpx
base, n, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
body = {"model": "tiny-1", "messages": [{"role": "user", "content": "How much to refund?"}], "temperature": 0.2}
plain, first = [], []
with httpx.Client(timeout=30) as client:
    client.post(base + "/v1/chat/completions", json=body).raise_for_status()  # warm: connection, TLS
    for _ in range(n):
        t = time.perf_counter()
        client.post(base + "/v1/chat/completions", json=body).raise_for_status()
        plain.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        with client.stream("POST", base + "/v1/chat/completions", json={**body, "stream": True}) as r:
            seen = None
            for line in r.iter_lines():
                if seen is None and '"content"' in line:
                    seen = (time.perf_counter() - t) * 1000
            first.append(seen)
json.dump({"plain": plain, "first": first}, open(out, "w"))
"""


def percentile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(q * (len(xs) - 1)))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=100, help="plain and streamed calls per round and arm")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--hold-ms", type=float, default=20.0)
    ap.add_argument("--plain-http", action="store_true", help="serve the model over plain HTTP (as vLLM does)")
    ap.add_argument("--no-sandbox", action="store_true", help="reel run --no-sandbox: the proxy alone")
    args = ap.parse_args()
    reel = str(Path(sys.executable).with_name("reel"))
    with tempfile.TemporaryDirectory(prefix="reelbench-model-") as tmp_s:
        tmp = Path(tmp_s)
        client = tmp / "client.py"
        client.write_text(CLIENT)
        with ModelServer(tmp / "model", hold=args.hold_ms / 1000, tls=not args.plain_http) as model:
            subprocess.run([reel, "init", str(tmp / "store")], check=True, capture_output=True)
            subprocess.run([reel, "-C", str(tmp / "store"), "config", "http.trust", str(model.ca)], check=True)
            direct_env = {**os.environ, "SSL_CERT_FILE": str(model.ca)}
            results: dict[str, dict[str, list[float]]] = {
                "direct": {"plain": [], "first": []},
                "reel run": {"plain": [], "first": []},
            }
            for i in range(args.rounds):
                for arm in ("direct", "reel run") if i % 2 == 0 else ("reel run", "direct"):
                    out = tmp / f"{arm.replace(' ', '-')}-{i}.json"
                    cmd = [sys.executable, str(client), model.url, str(args.calls), str(out)]
                    if arm == "direct":
                        subprocess.run(cmd, check=True, env=direct_env)
                    else:
                        subprocess.run(
                            [
                                reel,
                                "-C",
                                str(tmp / "store"),
                                "run",
                                "--abort",
                                "--model",
                                model.url,
                                *(["--no-sandbox"] if args.no_sandbox else []),
                                "--",
                                *cmd,
                            ],
                            check=True,
                            capture_output=True,
                        )
                    got = json.loads(out.read_text())
                    for k in ("plain", "first"):
                        results[arm][k] += got[k]
    scheme = "http" if args.plain_http else "https"
    sandbox = ", no sandbox" if args.no_sandbox else ""
    print(
        f"== model calls through reel run ({scheme}{sandbox}, loopback, {args.rounds} rounds x {args.calls} calls, "
        f"interleaved; ms)"
    )
    print(
        f"{'measure':<28}{'direct p50':>12}{'p99':>9}{'reel run p50':>14}{'p99':>9}{'added p50':>11}{'added p99':>11}"
    )
    for k, label in (("plain", "plain call, end to end"), ("first", "streamed, to first token")):
        d, r = results["direct"][k], results["reel run"][k]
        print(
            f"{label:<28}{statistics.median(d):>12.2f}{percentile(d, 0.99):>9.2f}"
            f"{statistics.median(r):>14.2f}{percentile(r, 0.99):>9.2f}"
            f"{statistics.median(r) - statistics.median(d):>11.2f}{percentile(r, 0.99) - percentile(d, 0.99):>11.2f}"
        )


if __name__ == "__main__":
    main()
