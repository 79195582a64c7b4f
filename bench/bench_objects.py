"""Bulk writes and batch reads of 20,000 small objects: reelstore next to git and dulwich, same data.

    python3 bench/bench_objects.py [--count N] [--repeat R]

Writes: reelstore `put_many` into a loose store (with and without fsync), `git fast-import` and
dulwich `add_objects` (both write one pack), and the loose paths of each (`git hash-object -w
--stdin-paths`, dulwich `add_object`). Reads: library reads (reelstore `get`, which re-hashes and
decodes; dulwich `get_raw` from the pack) and `cat-file --batch` / `--batch-check` subprocesses.
Ratios are reelstore time / other time: below 1 means reelstore is faster.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

from dulwich.object_store import DiskObjectStore
from dulwich.objects import Blob as GitBlob

from reelstore.backend.object_store import LooseObjectStore
from reelstore.backend.repo import Repo
from reelstore.objects import Blob

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import Table, fast_import_blobs, fresh_dir, git, git_init, median_time, payloads, scratch  # noqa: E402


def reel_cmd() -> list[str]:
    found = shutil.which("reel")
    if not found:
        sys.exit("the reel command is not installed: pip install -e .")
    return [found]


def run_batch(cmd: list[str], cwd: Path, names: bytes) -> bytes:
    proc = subprocess.run(cmd, cwd=cwd, input=names, capture_output=True, check=True)
    return proc.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=20_000)
    parser.add_argument("--fsync-count", type=int, default=1_000, help="objects in the loose fsync-on runs")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    data = payloads(args.count, 50, 500, seed=42)
    reel_blobs = [Blob(d) for d in data]
    dul_blobs = [GitBlob.from_string(d) for d in data]
    print(
        f"{args.count} objects, {sum(map(len, data)) / 1e6:.1f} MB of payload (50-500 bytes each), "
        f"median of {args.repeat} runs; ratios are reelstore / other"
    )
    table = Table(f"bench_objects: {args.count} small objects")
    with scratch() as tmp:
        state: dict = {}

        def reel_repo() -> None:
            path = fresh_dir(tmp, "reel")
            Repo.init(path)
            state["repo"] = Repo.open(path)

        def reel_loose() -> None:
            state["loose"] = LooseObjectStore(fresh_dir(tmp, "loose"), fsync=state["fsync"])

        def git_repo() -> None:
            state["git"] = git_init(fresh_dir(tmp, "git"))

        def dul_repo() -> None:
            state["dul"] = DiskObjectStore.init(fresh_dir(tmp, "dul"))

        # Bulk writes: one pack each (reelstore's disk store packs a put_many of 1,000+ new objects).
        stream = fast_import_blobs(data)
        table.add(
            "write: bulk put_many / fast-import / add_objects",
            median_time(lambda: state["repo"].objects.put_many(reel_blobs), args.repeat, setup=reel_repo),
            median_time(
                lambda: git("fast-import", "--quiet", cwd=state["git"], input=stream), args.repeat, setup=git_repo
            ),
            median_time(lambda: state["dul"].add_objects([(b, None) for b in dul_blobs]), args.repeat, setup=dul_repo),
        )

        # Loose writes: one file per object.
        files = fresh_dir(tmp, "files")
        for i, d in enumerate(data):
            (files / str(i)).write_bytes(d)

        def loose_writes(n: int, fsync: bool) -> tuple[float, float, float]:
            state["fsync"] = fsync
            paths = "".join(f"{files / str(i)}\n" for i in range(n)).encode()
            sync = ["-c", "core.fsync=loose-object", "-c", "core.fsyncMethod=fsync"] if fsync else []

            def dul() -> None:
                for b in dul_blobs[:n]:
                    state["dul"].add_object(b)

            def dul_setup() -> None:
                state["dul"] = DiskObjectStore(str(fresh_dir(tmp, "dul")), fsync_object_files=fsync)
                (tmp / "dul" / "pack").mkdir()
                (tmp / "dul" / "info").mkdir()

            return (
                median_time(lambda: state["loose"].put_many(reel_blobs[:n]), args.repeat, setup=reel_loose),
                median_time(
                    lambda: git(*sync, "hash-object", "-w", "--stdin-paths", cwd=state["git"], input=paths),
                    args.repeat,
                    setup=git_repo,
                ),
                median_time(dul, args.repeat, setup=dul_setup),
            )

        table.add("write: loose, no fsync (hash-object -w / add_object)", *loose_writes(args.count, False))
        n = min(args.fsync_count, args.count)
        table.add(f"write: loose, fsync each, {n} objects", *loose_writes(n, True))

        # Reads: the packed stores written above, and a loose reelstore.
        reel_repo()
        state["repo"].objects.put_many(reel_blobs)
        state["fsync"] = False
        reel_loose()
        state["loose"].put_many(reel_blobs)
        git_repo()
        git("fast-import", "--quiet", cwd=state["git"], input=stream)
        dul_repo()
        state["dul"].add_objects([(b, None) for b in dul_blobs])
        reel_ids = [b.id for b in reel_blobs]
        git_ids = [b.id for b in dul_blobs]

        def reads(get, ids) -> float:
            return median_time(lambda: [get(h) for h in ids], args.repeat)

        packed_get, loose_get = reads(state["repo"].objects.get, reel_ids), reads(state["loose"].get, reel_ids)
        dul_get = reads(DiskObjectStore(str(tmp / "dul")).get_raw, git_ids)
        table.add("read: library, every object from a pack (get / get_raw)", packed_get, None, dul_get)
        table.add("read: library, every object, loose (get)", loose_get, None, dul_get)

        reel = reel_cmd()
        reel_names = "".join(f"{h.hex()}\n" for h in reel_ids).encode()
        git_names = b"".join(h + b"\n" for h in git_ids)
        repo_dir = state["repo"].path.parent

        def check(out: bytes) -> None:
            if out.count(b" blob ") != len(data):
                raise RuntimeError("cat-file did not report every object")

        for mode in ("--batch", "--batch-check"):
            r = median_time(lambda m=mode: check(run_batch([*reel, "cat-file", m], repo_dir, reel_names)), args.repeat)
            g = median_time(
                lambda m=mode: check(run_batch(["git", "cat-file", m], state["git"], git_names)), args.repeat
            )
            table.add(f"read: cat-file {mode}, {args.count} ids, one process", r, g, None)
        table.add(
            "process start (reel --version / git --version)",
            median_time(lambda: subprocess.run([*reel, "--version"], capture_output=True, check=True), args.repeat),
            median_time(lambda: subprocess.run(["git", "--version"], capture_output=True, check=True), args.repeat),
            None,
        )
    table.print()


if __name__ == "__main__":
    main()
