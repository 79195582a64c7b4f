"""Large content end to end: time and peak RSS of every command on one big file, beside git.

    python3 bench/bench_large_file.py [--size-mib N]   (default 2048: 2 GiB, past any single read buffer)

Each command is a real `reel` (or `git`) under an address-space limit (RLIMIT_AS, 6 GiB: mapped packs
count there), its peak resident memory read from `ru_maxrss`. The goal is every reel step under
200 MB whatever the file's size. Also measured: a crafted 16-entry pack inflating to 1 GiB
(`unpack-objects -n`, `index-pack --stdin`), a remote whose sync commit holds a 1 GiB zero blob
(`fetch`, refused), and `reel run -- truncate -s 2G big.bin`.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import blake3

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "helpers"))
sys.path.insert(0, str(ROOT / "bench"))

from _util import scratch  # noqa: E402
from test_decoder_budgets import _bomb_pack  # noqa: E402

from reelstore.objects import Hash  # noqa: E402
from reelstore.sync.state import format_refs  # noqa: E402

MiB = 1 << 20
LIMIT = 6 << 30
GOAL = 200 * MiB
REEL = str(Path(sys.executable).with_name("reel"))
_WRAPPER = r"""
import resource, subprocess, sys
limit = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
code = subprocess.call(sys.argv[2:])
sys.stderr.write("\nMAXRSS %d\n" % resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
sys.exit(code)
"""
rows: list[tuple[str, str, float, int, int]] = []


def measure(
    label: str,
    tool: str,
    cmd: list[str],
    cwd: Path,
    stdin: Path | None = None,
    stdout: Path | None = None,
    expect: int = 0,
) -> None:
    fin = open(stdin, "rb") if stdin else subprocess.DEVNULL
    fout = open(stdout, "wb") if stdout else subprocess.DEVNULL
    start = time.perf_counter()
    try:
        proc = subprocess.run(
            [sys.executable, "-c", _WRAPPER, str(LIMIT), *cmd], cwd=cwd, stdin=fin, stdout=fout, stderr=subprocess.PIPE
        )
    finally:
        for f in (fin, fout):
            if hasattr(f, "close"):
                f.close()
    took = time.perf_counter() - start
    err = proc.stderr.decode("utf-8", "replace").rstrip()
    body, _, tail = err.rpartition("\nMAXRSS ")
    rss = int(tail) * 1024
    if proc.returncode != expect:
        sys.exit(f"{label}: exit {proc.returncode} (expected {expect}): {body[-2000:]}")
    rows.append((label, tool, took, rss, proc.returncode))
    print(f"{label:<44} {tool:<5} {took:8.1f} s  {rss / MiB:8.1f} MiB  exit {proc.returncode}", flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(port: int) -> None:
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    sys.exit(f"git daemon did not listen on port {port}")


def make_file(path: Path, size: int) -> None:
    rng = random.Random(7)
    with open(path, "wb") as f:
        for _ in range(size // MiB):
            f.write(rng.randbytes(MiB))


def same(a: Path, b: Path) -> None:
    def digest(p: Path) -> bytes:
        h = blake3.blake3()
        with open(p, "rb") as f:
            while piece := f.read(8 * MiB):
                h.update(piece)
        return h.digest()

    if a.stat().st_size != b.stat().st_size or digest(a) != digest(b):
        sys.exit(f"{b} differs from {a}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size-mib", type=int, default=2048)
    size = parser.parse_args().size_mib * MiB
    with scratch("reel-large-") as tmp:
        src, out = tmp / "big.bin", tmp / "out.bin"
        make_file(src, size)
        a, b, remote = tmp / "a", tmp / "b", tmp / "remote.git"
        for d in (a, b):
            d.mkdir()
            subprocess.run([REEL, "init"], cwd=d, check=True, capture_output=True)
        subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
        # Served by git daemon on loopback, so git's own processes are not reel's children and their
        # memory (git maps its packs) is not counted as reel's.
        port = free_port()
        daemon = subprocess.Popen(
            [
                "git",
                "daemon",
                "--reuseaddr",
                "--export-all",
                "--enable=receive-pack",
                f"--base-path={tmp}",
                "--listen=127.0.0.1",
                f"--port={port}",
                str(tmp),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for(port)
        url = f"git://127.0.0.1:{port}/remote.git"
        subprocess.run([REEL, "remote", "add", "origin", url], cwd=a, check=True)
        subprocess.run([REEL, "remote", "add", "origin", url], cwd=b, check=True)
        subprocess.run([REEL, "fork", "v"], cwd=a, check=True, capture_output=True)
        mib = size // MiB
        measure(f"put {mib} MiB", "reel", [REEL, "put", "v", "big"], a, stdin=src)
        measure("get (loose)", "reel", [REEL, "get", "v", "big"], a, stdout=out)
        same(src, out)
        subprocess.run([REEL, "commit", "v"], cwd=a, check=True, capture_output=True)
        measure("fsck --full (loose)", "reel", [REEL, "fsck", "--full"], a)
        measure("gc --prune=now", "reel", [REEL, "gc", "--prune=now"], a)
        measure("fsck --full (packed)", "reel", [REEL, "fsck", "--full"], a)
        h = subprocess.run([REEL, "hash-object", str(src)], cwd=a, check=True, capture_output=True).stdout.decode()
        measure("cat-file -p (packed)", "reel", [REEL, "cat-file", "-p", h.strip()], a, stdout=out)
        same(src, out)
        measure("hash-object", "reel", [REEL, "hash-object", str(src)], a)
        measure("push", "reel", [REEL, "push"], a)
        measure("fetch", "reel", [REEL, "fetch"], b)
        measure("fsck --full (fetched)", "reel", [REEL, "fsck", "--full"], b)
        g = tmp / "g"
        subprocess.run(["git", "init", "-q", str(g)], check=True)
        measure(f"hash-object -w {mib} MiB", "git", ["git", "hash-object", "-w", str(src)], g)
        gid = subprocess.run(["git", "hash-object", str(src)], cwd=g, check=True, capture_output=True).stdout
        measure("cat-file -p", "git", ["git", "cat-file", "-p", gid.decode().strip()], g, stdout=out)
        out.unlink()
        r = tmp / "r"
        r.mkdir()
        subprocess.run([REEL, "init"], cwd=r, check=True, capture_output=True)
        measure(
            "run -- truncate -s 2G big.bin",
            "reel",
            [REEL, "run", "--commit", "--", "truncate", "-s", "2G", "big.bin"],
            r,
        )
        bomb = tmp / "bomb.pack"
        packed = _bomb_pack(bomb, 16)
        measure(
            f"unpack-objects -n ({packed // 1024} KB pack, 1 GiB)",
            "reel",
            [REEL, "unpack-objects", "-n"],
            r,
            stdin=bomb,
        )
        measure("index-pack --stdin (same pack)", "reel", [REEL, "index-pack", "--stdin"], r, stdin=bomb)
        evil = tmp / "evil.git"
        subprocess.run(["git", "init", "-q", "--bare", str(evil)], check=True)
        subprocess.run(["git", "config", "core.bigFileThreshold", "1m"], cwd=evil, check=True)
        zeros = tmp / "zeros"
        with open(zeros, "wb") as f:
            f.write(b"blob\x00\xc6" + ((1 << 30) - 11).to_bytes(4, "big"))
            f.truncate(1 << 30)

        def git_out(*args: str, data: bytes | None = None) -> str:
            return (
                subprocess.run(["git", *args], cwd=evil, input=data, check=True, capture_output=True)
                .stdout.decode()
                .strip()
            )

        sha = git_out("hash-object", "-w", "--no-filters", str(zeros))
        name = "cd" * 32
        shard = git_out("mktree", data=f"100644 blob {sha}\t{name[2:]}\n".encode())
        fan = git_out("mktree", data=f"040000 tree {shard}\t{name[:2]}\n".encode())
        refs = git_out("hash-object", "-w", "--stdin", data=format_refs({"refs/heads/main": Hash.from_hex(name)}))
        root = git_out("mktree", data=f"040000 tree {fan}\tobjects\n100644 blob {refs}\trefs\n".encode())
        git_out("update-ref", "refs/reel/heads/main", git_out("commit-tree", root, "-m", "bomb"))
        subprocess.run([REEL, "remote", "add", "evil", str(evil)], cwd=r, check=True)
        measure("fetch of a 1 GiB zero blob (refused)", "reel", [REEL, "fetch", "evil"], r, expect=3)
        daemon.kill()
        daemon.wait(timeout=30)
        over = [(label, rss) for label, tool, _, rss, _ in rows if tool == "reel" and rss > GOAL]
        print(f"\nreel steps over {GOAL // MiB} MiB: {over or 'none'}")
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    os.environ.pop("REEL_DIR", None)
    main()
