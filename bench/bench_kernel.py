"""Kernel benchmarks: fork cost against namespace size, put throughput, commit of 1,000 changed names.

Targets (issue 4): fork at 1,000,000 entries within 1.2x of fork at 1,000, and at most 1 ms in process.
git and dulwich do the nearest equivalent on the same generated data: a branch is a ref write
(`git branch`, dulwich `refs[...] =`), a put is a blob write, a commit of 1,000 changed files is
`git add` + `git commit` (dulwich: build the tree and the commit object).

    python3 bench/bench_kernel.py [--big 1000000] [--puts 1000] [--changed 1000]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _util import Table, git, payloads, scratch, timed  # noqa: E402
from dulwich.objects import Blob as GitBlob  # noqa: E402
from dulwich.objects import Commit, Tree  # noqa: E402
from dulwich.repo import Repo as GitRepo  # noqa: E402

from reelstore.backend.repo import Repo  # noqa: E402
from reelstore.kernel import verbs as kernel  # noqa: E402
from reelstore.objects import Blob, Record  # noqa: E402


def trunk_with(repo: Repo, n: int) -> float:
    """Point the trunk at a record whose namespace holds `n` names; returns the seconds it took."""
    blob = Blob(b"payload")
    repo.objects.put(blob)
    ns = kernel.namespace(repo)
    start = time.perf_counter()
    root = ns.update(ns.empty(), {f"dir{i % 1000:04d}/file{i:08d}": blob.id for i in range(n)})
    head = repo.refs["refs/heads/main"]
    rec = Record(head, root, message=f"{n} names")
    repo.objects.put(rec)
    repo.refs.set("refs/heads/main", rec.id, head)
    return time.perf_counter() - start


def fork_median(repo: Repo, count: int, tag: str) -> float:
    times = []
    for i in range(count):
        t0 = time.perf_counter()
        kernel.fork(repo, f"{tag}-{i}")
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def fork_medians(a: Repo, b: Repo, count: int) -> tuple[float, float]:
    """Median fork time in `a` and in `b`, forks interleaved so machine noise hits both alike."""
    ta, tb = [], []
    for i in range(count):
        for repo, times in ((a, ta), (b, tb)):
            t0 = time.perf_counter()
            kernel.fork(repo, f"i-{i}")
            times.append(time.perf_counter() - t0)
    return statistics.median(ta), statistics.median(tb)


def dulwich_branch_median(path: Path, count: int) -> float:
    repo = GitRepo.init_bare(str(path), mkdir=True)
    blob = GitBlob.from_string(b"payload")
    tree = Tree()
    tree.add(b"f", 0o100644, blob.id)
    c = Commit()
    c.tree = tree.id
    c.author = c.committer = b"b <b@b>"
    c.author_time = c.commit_time = 0
    c.author_timezone = c.commit_timezone = 0
    c.message = b"m"
    repo.object_store.add_objects([(blob, None), (tree, None), (c, None)])
    times = []
    for i in range(count):
        t0 = time.perf_counter()
        repo.refs[b"refs/heads/b%d" % i] = c.id
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def bench_fork(big: int, table: Table) -> tuple[float, float]:
    small_repo, big_repo = Repo.memory(), Repo.memory()
    trunk_with(small_repo, 1000)
    built = trunk_with(big_repo, big)
    print(f"(built a {big:,}-name namespace in {built:.1f}s)")
    small, large = fork_medians(small_repo, big_repo, 2000)
    with scratch() as d:
        dul = dulwich_branch_median(d / "dul.git", 300)
        on_disk = Repo.init(d / "reel")
        trunk_with(on_disk, 1000)
        disk = fork_median(on_disk, 50, "d")
        git_init = d / "g.git"
        git("init", "-q", "--bare", str(git_init))
        tree = git("hash-object", "-w", "-t", "tree", "--stdin", cwd=git_init, input=b"").strip()
        commit = git("commit-tree", tree.decode(), "-m", "m", cwd=git_init).strip().decode()
        git_t = statistics.median(timed(lambda i=i: git("branch", f"b{i}", commit, cwd=git_init))[0] for i in range(20))
    table.add("fork, 1,000 names (memory store)", small, None, dul)
    table.add(f"fork, {big:,} names (memory store)", large, None, dul)
    table.add("fork, 1,000 names (disk, fsync)", disk, git_t, dul)
    return small, large


def bench_put(count: int, table: Table) -> None:
    data = payloads(count, seed=4)
    with scratch() as d:
        repo = Repo.init(d / "reel")
        kernel.fork(repo, "w")
        t_reel, _ = timed(lambda: [kernel.put(repo, "w", f"f/{i:06d}", b) for i, b in enumerate(data)])
        quick = Repo.init(d / "reel-nofsync")
        quick.config.set("core.fsync", "false")
        quick.config.save()
        quick = Repo.open(quick.path)
        kernel.fork(quick, "w")
        t_quick, _ = timed(lambda: [kernel.put(quick, "w", f"f/{i:06d}", b) for i, b in enumerate(data)])
        mem = Repo.memory()
        kernel.fork(mem, "w")
        t_mem, _ = timed(lambda: [kernel.put(mem, "w", f"f/{i:06d}", b) for i, b in enumerate(data)])
        dul = GitRepo.init_bare(str(d / "dul.git"), mkdir=True)
        t_dul, _ = timed(lambda: [dul.object_store.add_object(GitBlob.from_string(b)) for b in data])
        git_dir = d / "g.git"
        git("init", "-q", "--bare", str(git_dir))
        t_git, _ = timed(
            lambda: git("hash-object", "-w", "--stdin-paths", cwd=git_dir, input=b"".join(_paths(d, data)))
        )
    print(
        f"put throughput: {count / t_reel:,.0f}/s on disk, {count / t_quick:,.0f}/s on disk without fsync, "
        f"{count / t_mem:,.0f}/s in memory "
        f"(each put: blob + namespace update + delta + view object + ref CAS)"
    )
    table.add(f"put x{count} (disk; git: hash-object -w; dulwich: add_object)", t_reel, t_git, t_dul)
    table.add(f"put x{count} (disk, core.fsync=false)", t_quick, t_git, t_dul)
    table.add(f"put x{count} (memory store)", t_mem, None, None)


def _paths(d: Path, data: list[bytes]) -> list[bytes]:
    src = d / "src"
    src.mkdir(exist_ok=True)
    out = []
    for i, b in enumerate(data):
        p = src / f"{i:06d}"
        p.write_bytes(b)
        out.append(str(p).encode() + b"\n")
    return out


def bench_commit(changed: int, table: Table) -> None:
    data = payloads(changed, seed=5)
    with scratch() as d:
        repo = Repo.init(d / "reel")
        kernel.fork(repo, "big")
        for i, b in enumerate(data):
            kernel.put(repo, "big", f"f/{i:06d}", b)
        kernel.fork(repo, "other")
        kernel.put(repo, "other", "elsewhere", b"x")
        kernel.commit(repo, "other")
        t_reel, _ = timed(lambda: kernel.commit(repo, "big"))

        work = d / "g"
        git("init", "-q", str(work))
        git("commit", "-q", "--allow-empty", "-m", "root", cwd=work)
        for i, b in enumerate(data):
            (work / f"{i:06d}").write_bytes(b)
        t_git, _ = timed(lambda: (git("add", "-A", cwd=work), git("commit", "-q", "-m", "c", cwd=work)))

        dul = GitRepo.init_bare(str(d / "dul.git"), mkdir=True)

        def dul_commit() -> None:
            tree = Tree()
            blobs = []
            for i, b in enumerate(data):
                blob = GitBlob.from_string(b)
                blobs.append((blob, None))
                tree.add(b"%06d" % i, 0o100644, blob.id)
            c = Commit()
            c.tree = tree.id
            c.author = c.committer = b"b <b@b>"
            c.author_time = c.commit_time = 0
            c.author_timezone = c.commit_timezone = 0
            c.message = b"c"
            dul.object_store.add_objects([*blobs, (tree, None), (c, None)])
            dul.refs[b"refs/heads/main"] = c.id

        t_dul, _ = timed(dul_commit)
    table.add(f"commit of {changed} changed names, trunk moved (rebase)", t_reel, t_git, t_dul)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--big", type=int, default=1_000_000)
    ap.add_argument("--puts", type=int, default=1000)
    ap.add_argument("--changed", type=int, default=1000)
    args = ap.parse_args()
    table = Table("kernel")
    small, large = bench_fork(args.big, table)
    bench_put(args.puts, table)
    bench_commit(args.changed, table)
    table.print()
    print(
        f"fork ratio {args.big:,} / 1,000 names: {large / small:.2f} (target <= 1.2); "
        f"fork at {args.big:,}: {large * 1000:.3f} ms (target <= 1 ms)"
    )


if __name__ == "__main__":
    main()
