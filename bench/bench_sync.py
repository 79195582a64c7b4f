"""Sync benchmark: reel push/fetch through a git remote next to git push/fetch of the same blobs.

A store gets N payload blobs under one namespace and a record on `main`. reelstore pushes it to a
bare repository by path (dulwich in process on both ends) and through a real `git daemon` (git's
receive-pack and upload-pack), then a fresh store fetches it back. git pushes and fetches a
repository holding exactly the same blob bytes (each reel object's canonical bytes) in the same
`objects/ab/cdef…` layout, by path, so its rows include process start-up; dulwich's porcelain push
and clone (in process on both ends) move that same git repository.

The incremental rows add 100 new blobs on top of remotes holding 2,000 and 20,000 objects: a push
walks down from the new record and stops at objects the remote holds, and writes trees only for
its own new objects, so its time should not grow with the store.

    python3 bench/bench_sync.py               # 20,000 objects, incremental at 2,000 and 20,000
    python3 bench/bench_sync.py --n 5000
"""

from __future__ import annotations

import argparse
import io
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _util import GIT_ENV, Table, git, git_init, payloads, scratch, timed  # noqa: E402
from dulwich import porcelain  # noqa: E402

from reelstore import sync  # noqa: E402
from reelstore.backend.repo import Repo  # noqa: E402
from reelstore.namespace.tree import Namespace  # noqa: E402
from reelstore.objects import Blob, Record  # noqa: E402

INCREMENT = 100
REPEAT = 3


def grow(repo: Repo, data: list[bytes], tag: str) -> list[bytes]:
    """Commit `data` as blobs on main; returns the canonical bytes of every object written."""
    blobs = [Blob(d) for d in data]
    repo.objects.put_many(blobs)
    head = repo.refs["refs/heads/main"]
    ns = Namespace(repo.objects)
    base = repo.objects.get(head).namespace
    root = ns.update(base, {f"{tag}/{i:06d}": b.id for i, b in enumerate(blobs)})
    rec = Record(head, root, message=tag, time=int(time.time() * 1000))
    repo.objects.put(rec)
    repo.refs.set("refs/heads/main", rec.id, head)
    return [b.encode() for b in blobs]


def git_import(path: Path, blobs: list[bytes], parent: bool) -> None:
    """Commit `blobs` into `path` on main in the `objects/ab/cdef…` layout, with git fast-import."""
    from reelstore.objects import Hash

    parts = [b"commit refs/heads/main\ncommitter b <b@b> 0 +0000\ndata 0\n"]
    if parent:
        parts.append(b"from refs/heads/main^0\n")
    for raw in blobs:
        name = Hash.of(raw).hex()
        parts.append(
            b"M 100644 inline objects/%s/%s\ndata %d\n%s\n" % (name[:2].encode(), name[2:].encode(), len(raw), raw)
        )
    git("fast-import", "--quiet", cwd=path, input=b"".join(parts))


class Daemon:
    def __init__(self, base: Path) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.proc = subprocess.Popen(
            [
                "git",
                "daemon",
                "--reuseaddr",
                f"--base-path={base}",
                "--export-all",
                "--enable=receive-pack",
                "--listen=127.0.0.1",
                f"--port={self.port}",
                str(base),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**GIT_ENV, "PATH": "/usr/bin:/bin"},
        )
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("git daemon did not start")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


def full(tmp: Path, n: int, daemon: Daemon, table: Table, notes: list[str]) -> None:
    data = payloads(n, seed=7)
    src = Repo.init(tmp / "src")
    blobs = grow(src, data, "full")
    total = sum(1 for _ in src.objects)
    notes.append(f"store: {n:,} payload blobs (50-500 bytes) + namespace nodes + records = {total:,} objects")

    by_path = git_init(tmp / "reel-path.git")
    by_daemon = git_init(tmp / "served" / "reel.git")
    sync.add_remote(src, "path", str(by_path))
    sync.add_remote(src, "daemon", f"git://127.0.0.1:{daemon.port}/reel.git")
    t_path, res = timed(lambda: sync.push(src, "path"))
    t_daemon, _ = timed(lambda: sync.push(src, "daemon"))
    for pushed in (by_path, by_daemon):
        git("--git-dir", str(pushed), "fsck", "--strict", "--no-dangling", cwd=tmp)
    notes.append(f"reel push sent {res.objects:,} objects in one sync commit; git fsck --strict clean on both remotes")

    work = tmp / "git-src"
    git("init", "-q", str(work), cwd=tmp)
    git_import(work, blobs, parent=False)
    git_target = git_init(tmp / "git-target.git")
    t_git_push, _ = timed(lambda: git("push", "-q", str(git_target), "main", cwd=work))
    dul_target = git_init(tmp / "dulwich-target.git")
    t_dul_push, _ = timed(
        lambda: porcelain.push(
            str(work), str(dul_target), [b"refs/heads/main"], outstream=io.BytesIO(), errstream=io.BytesIO()
        )
    )
    table.add(f"push {n:,} blobs (path remote)", t_path, t_git_push, t_dul_push)
    table.add(f"push {n:,} blobs (reel via git daemon)", t_daemon, t_git_push)

    dst = Repo.init(tmp / "dst")
    sync.add_remote(dst, "path", str(by_path))
    t_fetch, got = timed(lambda: sync.fetch(dst, "path"))
    dst2 = Repo.init(tmp / "dst2")
    sync.add_remote(dst2, "daemon", f"git://127.0.0.1:{daemon.port}/reel.git")
    t_fetch_d, _ = timed(lambda: sync.fetch(dst2, "daemon"))
    assert dst.refs["refs/remotes/path/heads/main"] == src.refs["refs/heads/main"]
    notes.append(f"reel fetch stored {got.objects:,} objects, each re-hashed with BLAKE3 and decoded")
    fetch_into = tmp / "git-fetch"
    git("init", "-q", str(fetch_into), cwd=tmp)
    t_git_fetch, _ = timed(lambda: git("fetch", "-q", str(git_target), "main", cwd=fetch_into))
    t_dul_fetch, _ = timed(
        lambda: porcelain.clone(str(git_target), str(tmp / "dulwich-clone"), bare=True, errstream=io.BytesIO()).close()
    )
    table.add(f"fetch {n:,} blobs (path remote)", t_fetch, t_git_fetch, t_dul_fetch)
    table.add(f"fetch {n:,} blobs (reel via git daemon)", t_fetch_d, t_git_fetch)


def incremental(tmp: Path, existing: int, table: Table, notes: list[str]) -> None:
    """Median of three pushes of 100 new blobs each (reel and git alike), on top of `existing` objects."""
    base = tmp / f"inc-{existing}"
    repo = Repo.init(base / "store")
    grow(repo, payloads(existing, seed=existing), "old")
    remote = git_init(base / "remote.git")
    sync.add_remote(repo, "origin", str(remote))
    sync.push(repo, "origin")
    work = base / "git-src"
    git("init", "-q", str(work), cwd=base)
    git_import(work, [Blob(d).encode() for d in payloads(existing, seed=existing)], parent=False)
    git_remote = git_init(base / "git-remote.git")
    git("push", "-q", str(git_remote), "main", cwd=work)
    reel_times, git_times, sent = [], [], set()
    for round_ in range(REPEAT):
        fresh = payloads(INCREMENT, seed=existing * 10 + round_ + 1)
        grow(repo, fresh, f"new{round_}")
        t_reel, res = timed(lambda: sync.push(repo, "origin"))
        git_import(work, [Blob(d).encode() for d in fresh], parent=True)
        t_git, _ = timed(lambda: git("push", "-q", str(git_remote), "main", cwd=work))
        reel_times.append(t_reel)
        git_times.append(t_git)
        sent.add(res.objects)
    table.add(
        f"push {INCREMENT} new into {existing:,} (path remote)",
        statistics.median(reel_times),
        statistics.median(git_times),
    )
    notes.append(
        f"incremental push into {existing:,}: {'/'.join(map(str, sorted(sent)))} objects sent per push "
        f"(median of {REPEAT})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20_000, help="objects in the full push and fetch")
    parser.add_argument("--small", type=int, default=2_000, help="the smaller store of the incremental rows")
    args = parser.parse_args()
    table = Table("sync: reel push/fetch vs git push/fetch of the same blobs (one run each)")
    notes: list[str] = []
    with scratch("reelbench-sync-") as tmp:
        (tmp / "served").mkdir()
        daemon = Daemon(tmp / "served")
        try:
            full(tmp, args.n, daemon, table, notes)
        finally:
            daemon.stop()
        for existing in (args.small, args.n):
            incremental(tmp, existing, table, notes)
    table.print()
    for note in notes:
        print(f"  {note}")
    inc = [r for r in table.rows if r[0].startswith("push 100")]
    if len(inc) == 2 and inc[0][1]:
        print(
            f"  incremental push time at {args.n:,} / at {args.small:,} existing objects: "
            f"{inc[1][1] / inc[0][1]:.2f}x (store {args.n / args.small:.0f}x larger)"
        )


if __name__ == "__main__":
    main()
