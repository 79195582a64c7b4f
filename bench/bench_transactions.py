"""Transactions and group commit against git, side by side in one run: fsyncs per operation and time.

Rows (medians over interleaved rounds; CPU = user + system time of the command and its children):
- importing N files into one view (`reel fork v && reel put v tree`, one transaction) against
  `git add -A && git commit` of the same files, with git's default fsync settings and with
  `core.fsync=all` (and `core.fsyncMethod=fsync`) as a second row; the reel row also reports the peak
  RSS of the import process;
- one durable put, one fork and one drained effect in process, with the fsyncs each costs (counted by
  wrapping os.fsync), against `git update-ref` / `git branch` on the command line (fsyncs counted with
  `strace -f -c -e trace=fsync,fdatasync` when strace is installed).

    python3 bench/bench_transactions.py [--files 1000,17560] [--size 21000] [--rounds 3] [--ops 30]
"""

from __future__ import annotations

import argparse
import os
import random
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _util import GIT_ENV, scratch  # noqa: E402

from reelstore.backend.repo import Repo  # noqa: E402
from reelstore.kernel import verbs as kernel  # noqa: E402

REEL = [sys.executable, "-c", "from reelstore.cli.main import main; main()"]
FSYNC_COUNTER = (
    "import os, sys\n"
    "n = [0]\n"
    "real = os.fsync\n"
    "def counted(fd):\n"
    "    n[0] += 1\n"
    "    real(fd)\n"
    "os.fsync = counted\n"
    "import atexit\n"
    "atexit.register(lambda: open(os.environ['REEL_BENCH_FSYNCS'], 'w').write(str(n[0])))\n"
    "from reelstore.cli.main import main\n"
    "main()\n"
)


def make_tree(root: Path, count: int, mean: int, seed: int = 7) -> int:
    """`count` files of random sizes (mean about `mean` bytes) in 2-level directories; returns bytes."""
    rng = random.Random(seed)
    total = 0
    for i in range(count):
        d = root / f"d{i % 97:02d}" / f"s{i % 13:02d}"
        d.mkdir(parents=True, exist_ok=True)
        size = max(1, int(rng.expovariate(1 / mean)))
        data = i.to_bytes(4, "big") + rng.randbytes(size // 2) + bytes(size - size // 2)
        (d / f"f{i:06d}.dat").write_bytes(data)
        total += len(data)
    return total


def run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds, peak RSS KiB) of one command and its children."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {proc.stderr.read().decode() if proc.stderr else ''}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss


def git_env(home: Path) -> dict[str, str]:
    return {**os.environ, **GIT_ENV, "HOME": str(home)}


def reel_env(counter: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("REEL_DIR", "REEL_TEST_CRASH_AT")}
    env["REEL_BENCH_FSYNCS"] = str(counter)
    return env


def strace_fsyncs(cmd: list[str], cwd: Path, env: dict[str, str]) -> int | None:
    """fsync + fdatasync calls of `cmd` and its children, by strace; None without strace."""
    if shutil.which("strace") is None:
        return None
    out = subprocess.run(
        ["strace", "-f", "-c", "-e", "trace=fsync,fdatasync", *cmd], cwd=cwd, env=env, capture_output=True, check=True
    ).stderr.decode()
    return sum(
        int(m.group(1))
        for m in re.finditer(r"^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?f(?:data)?sync", out, re.M)
    )


def import_rows(count: int, mean: int, rounds: int) -> list[str]:
    out = []
    with scratch("reelbench-tx-") as tmp:
        tree = tmp / "tree"
        total = make_tree(tree, count, mean)
        samples: dict[str, list[tuple[float, float, int]]] = {"reel": [], "git": [], "git-fsync-all": []}
        fsyncs: dict[str, int | None] = {}
        for r in range(rounds):
            for name in samples:
                work = tmp / f"{name}-{r}"
                work.mkdir()
                os.rename(tree, work / "tree")
                try:
                    if name == "reel":
                        counter = tmp / "fsyncs"
                        env = reel_env(counter)
                        subprocess.run([*REEL, "init"], cwd=work, env=env, check=True, capture_output=True)
                        subprocess.run([*REEL, "fork", "v"], cwd=work, env=env, check=True, capture_output=True)
                        samples[name].append(run([sys.executable, "-c", FSYNC_COUNTER, "put", "v", "tree"], work, env))
                        fsyncs[name] = int(counter.read_text())
                    else:
                        env = git_env(work)
                        subprocess.run(["git", "init", "-q"], cwd=work, env=env, check=True)
                        if name == "git-fsync-all":
                            subprocess.run(["git", "config", "core.fsync", "all"], cwd=work, env=env, check=True)
                            subprocess.run(
                                ["git", "config", "core.fsyncMethod", "fsync"], cwd=work, env=env, check=True
                            )
                        script = "git add -A && git commit -q -m import"
                        if r == 0:
                            fsyncs[name] = strace_fsyncs(["sh", "-c", script], work, env)
                            subprocess.run(["sh", "-c", "rm -rf .git && git init -q"], cwd=work, env=env, check=True)
                            if name == "git-fsync-all":
                                subprocess.run(["git", "config", "core.fsync", "all"], cwd=work, env=env)
                                subprocess.run(["git", "config", "core.fsyncMethod", "fsync"], cwd=work, env=env)
                        samples[name].append(run(["sh", "-c", script], work, env))
                finally:
                    os.rename(work / "tree", tree)
                    shutil.rmtree(work, ignore_errors=True)
        med = {
            n: (statistics.median(s[0] for s in v), statistics.median(s[1] for s in v), max(s[2] for s in v))
            for n, v in samples.items()
        }
        for name in ("git", "git-fsync-all"):
            rw, rc, rss = med["reel"]
            gw, gc, _ = med[name]
            out.append(
                f"import {count} files ({total / 1e6:.1f} MB)  reel wall {rw:.2f}s cpu {rc:.2f}s "
                f"fsyncs {fsyncs['reel']} rss {rss / 1024:.0f} MB | {name} wall {gw:.2f}s cpu {gc:.2f}s "
                f"fsyncs {fsyncs[name]} | ratio wall {rw / gw:.2f}x cpu {rc / gc:.2f}x"
            )
    return out


@contextmanager
def counting() -> Iterator[list[str]]:
    """The path of every os.fsync call in this process (files and directories alike)."""
    calls: list[str] = []
    real = os.fsync

    def counted(fd: int) -> None:
        try:
            calls.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            calls.append("?")
        real(fd)

    os.fsync = counted  # type: ignore[assignment]
    try:
        yield calls
    finally:
        os.fsync = real


def per_op(fn: Callable[[int], object], n: int) -> tuple[float, float]:
    """(median seconds, fsyncs per call) over `n` calls of fn(i)."""
    times, total = [], 0
    for i in range(n):
        with counting() as calls:
            t0 = time.perf_counter()
            fn(i)
            times.append(time.perf_counter() - t0)
        total += len(calls)
    return statistics.median(times), total / n


def op_rows(n: int) -> list[str]:
    out = []
    with scratch("reelbench-ops-") as tmp:
        repo = Repo.init(tmp / "reel")
        kernel.fork(repo, "base")
        fork_t, fork_f = per_op(lambda i: kernel.fork(repo, f"f{i}"), n)
        put_t, put_f = per_op(lambda i: kernel.put(repo, "base", f"dir/file{i}", b"payload %d" % i), n)
        out_dir = tmp / "reel" / "out"
        out_dir.mkdir()
        effects = 20
        kernel.fork(repo, "empty")
        kernel.put(repo, "empty", "x", b"x")
        with counting() as calls:
            kernel.commit(repo, "empty")
        commit_only = len(calls)
        kernel.fork(repo, "d")
        for i in range(effects):
            kernel.effect(repo, "d", "fs", {"action": "write", "path": f"out/e{i}.txt", "content": str(i)})
        t0 = time.perf_counter()
        with counting() as calls:
            result = kernel.commit(repo, "d")
        commit_t = time.perf_counter() - t0
        assert result.drain is not None and result.drain.complete
        drain_calls = len(calls)
        adapter = sum(1 for path in calls if path.startswith(str(out_dir)))
        journal = drain_calls - adapter - commit_only
        git_dir = tmp / "git"
        env = git_env(tmp)
        subprocess.run(["git", "init", "-q", str(git_dir)], env=env, check=True)
        subprocess.run(["git", "commit", "-q", "--allow-empty", "-m", "x"], cwd=git_dir, env=env, check=True)
        head = (
            subprocess.run(["git", "rev-parse", "HEAD"], cwd=git_dir, env=env, capture_output=True, check=True)
            .stdout.decode()
            .strip()
        )
        reel_cli, git_ur, git_br = [], [], []
        for i in range(n):
            reel_cli.append(run([*REEL, "put", "base", f"cli/{i}", "-"], tmp / "reel", reel_env(tmp / "c"))[0])
            git_ur.append(run(["git", "update-ref", f"refs/heads/u{i}", head], git_dir, env)[0])
            git_br.append(run(["git", "branch", f"b{i}"], git_dir, env)[0])
        git_ur_f = strace_fsyncs(["git", "update-ref", "refs/heads/strace", head], git_dir, env)
        git_br_f = strace_fsyncs(["git", "branch", "strace-b"], git_dir, env)
        all_ur, all_br = [], []
        for i in range(n):
            all_ur.append(
                run(["git", "-c", "core.fsync=all", "update-ref", f"refs/heads/ua{i}", head], git_dir, env)[0]
            )
            all_br.append(run(["git", "-c", "core.fsync=all", "branch", f"ba{i}"], git_dir, env)[0])
        all_ur_f = strace_fsyncs(
            ["git", "-c", "core.fsync=all", "update-ref", "refs/heads/strace-a", head], git_dir, env
        )
        all_br_f = strace_fsyncs(["git", "-c", "core.fsync=all", "branch", "strace-ba"], git_dir, env)
        reel_put_f = strace_fsyncs([*REEL, "put", "base", "cli/strace", "/dev/null"], tmp / "reel", reel_env(tmp / "c"))
        out.append(f"fork in process: {fork_t * 1000:.2f} ms, {fork_f:.1f} fsyncs")
        out.append(f"durable put in process: {put_t * 1000:.2f} ms, {put_f:.1f} fsyncs")
        out.append(
            f"commit + drain of {effects} fs effects: {commit_t * 1000:.1f} ms, {drain_calls} fsyncs: "
            f"commit {commit_only}, fs adapter {adapter}, journal {journal} "
            f"({journal / effects:.2f} per effect; {(journal + adapter) / effects:.2f} with the adapter's)"
        )
        out.append(f"reel put CLI: {statistics.median(reel_cli) * 1000:.1f} ms wall, {reel_put_f} fsyncs (strace)")
        out.append(f"git update-ref CLI: {statistics.median(git_ur) * 1000:.1f} ms wall, {git_ur_f} fsyncs (strace)")
        out.append(f"git branch CLI: {statistics.median(git_br) * 1000:.1f} ms wall, {git_br_f} fsyncs (strace)")
        out.append(
            f"git -c core.fsync=all update-ref CLI: {statistics.median(all_ur) * 1000:.1f} ms wall, "
            f"{all_ur_f} fsyncs (strace)"
        )
        out.append(
            f"git -c core.fsync=all branch CLI: {statistics.median(all_br) * 1000:.1f} ms wall, "
            f"{all_br_f} fsyncs (strace)"
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", default="1000,17560")
    ap.add_argument("--size", type=int, default=21000, help="mean file size in bytes (a typical source file: 21 KB)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--ops", type=int, default=30)
    args = ap.parse_args()
    print("== per operation")
    for line in op_rows(args.ops):
        print(line, flush=True)
    for count in (int(c) for c in args.files.split(",") if c):
        print(f"== import of {count} files")
        for line in import_rows(count, args.size, args.rounds):
            print(line, flush=True)
    print(f"(bench process peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB)")


if __name__ == "__main__":
    main()
