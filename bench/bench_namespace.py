"""Namespace map benchmark: reelstore's prolly tree next to git trees (dulwich in process, git itself).

The same generated names (three levels of `dNNN/eNN/fNNNNNNN`, 100 entries per git directory) and the
same 16 values go to all three. For each size: a bulk build, single-name updates, lookups, the diff of
two roots differing in k names, and iteration. reelstore and dulwich run in process on in-memory
object stores; git runs as a real process on a bare repository, so its rows include process start
(its update and lookup rows are amortised over one long-running process). A disk-store build of
reelstore is reported for the sizes in --disk-sizes.

    python3 bench/bench_namespace.py                  # 1,000 and 1,000,000 entries
    python3 bench/bench_namespace.py --sizes 1000 100000
"""

from __future__ import annotations

import argparse
import itertools
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _util import Table, git, git_init, scratch, timed  # noqa: E402
from dulwich.diff_tree import tree_changes  # noqa: E402
from dulwich.index import commit_tree  # noqa: E402
from dulwich.object_store import MemoryObjectStore as DulwichStore  # noqa: E402
from dulwich.object_store import commit_tree_changes, iter_tree_contents, tree_lookup_path  # noqa: E402
from dulwich.objects import Blob as DulwichBlob  # noqa: E402

from reelstore.backend.object_store import MemoryObjectStore  # noqa: E402
from reelstore.backend.repo import Repo  # noqa: E402
from reelstore.namespace.tree import Namespace  # noqa: E402
from reelstore.objects import Blob  # noqa: E402

UPDATES = 200
GETS = 2000
DIFF_KS = (1, 100, 1000)
ITEMS = 100_000
MODE = 0o100644


def make_names(n: int) -> list[str]:
    return [f"d{i // 10000:03d}/e{i // 100 % 100:02d}/f{i:07d}" for i in range(n)]


def bench_reelstore(names: list[str], picks: dict, notes: list[str]) -> dict:
    values = [Blob(b"value %d" % i).id for i in range(17)]
    store = MemoryObjectStore()
    ns = Namespace(store)
    content = {name: values[i % 16] for i, name in enumerate(names)}
    build, root = timed(lambda: ns.update(ns.empty(), content))
    trees = sum(1 for _ in store)
    levels = store.get(root).level + 1
    notes.append(
        f"reelstore build: {trees} tree nodes in {levels} levels (MemoryObjectStore), {len(names) / build:,.0f} names/s"
    )
    start = time.perf_counter()
    for k, name in enumerate(picks["update"]):
        root = ns.update(root, {name: values[(k + 1) % 16]})
    update = time.perf_counter() - start
    start = time.perf_counter()
    for name in picks["get"]:
        ns.get(root, name)
    get = time.perf_counter() - start
    diffs = {}
    for k, changed in picks["diff"].items():
        other = ns.update(root, {name: values[16] for name in changed})
        fresh = Namespace(store)
        diffs[k], found = timed(lambda fresh=fresh, other=other: list(fresh.diff(root, other)))
        assert len(found) == k
    m = min(len(names), ITEMS)
    fresh = Namespace(store)
    items, listed = timed(lambda: sum(1 for _ in itertools.islice(fresh.items(root), m)))
    notes.append(f"reelstore items: {listed / items:,.0f} names/s (cold node cache)")
    return {"build": build, "update": update, "get": get, "diff": diffs, "items": items * ITEMS / m}


def bench_dulwich(names: list[str], picks: dict) -> dict:
    store = DulwichStore()
    blobs = [DulwichBlob.from_string(b"value %d" % i) for i in range(17)]
    for blob in blobs:
        store.add_object(blob)
    rows = [(name.encode(), blobs[i % 16].id, MODE) for i, name in enumerate(names)]
    build, root = timed(lambda: commit_tree(store, rows))
    start = time.perf_counter()
    for k, name in enumerate(picks["update"]):
        root = commit_tree_changes(store, store[root], [(name.encode(), MODE, blobs[(k + 1) % 16].id)])
    update = time.perf_counter() - start
    start = time.perf_counter()
    for name in picks["get"]:
        tree_lookup_path(store.__getitem__, root, name.encode())
    get = time.perf_counter() - start
    diffs = {}
    for k, changed in picks["diff"].items():
        edits = [(name.encode(), MODE, blobs[16].id) for name in changed]
        other = commit_tree_changes(store, store[root], edits)
        diffs[k], found = timed(lambda other=other: list(tree_changes(store, root, other)))
        assert len(found) == k
    m = min(len(names), ITEMS)
    items, _ = timed(lambda: sum(1 for _ in itertools.islice(iter_tree_contents(store, root), m)))
    return {"build": build, "update": update, "get": get, "diff": diffs, "items": items * ITEMS / m}


def _fast_import(repo: Path, stream: bytes) -> None:
    git("fast-import", "--quiet", "--force", cwd=repo, input=stream)


def _commit(ref: str, parent: str | None, lines: list[bytes], mark: int) -> bytes:
    head = b"commit %s\nmark :%d\ncommitter b <b@x> 0 +0000\ndata 0\n" % (ref.encode(), mark)
    if parent:
        head += b"from %s\n" % parent.encode()
    return head + b"".join(lines) + b"\n"


def bench_git(names: list[str], picks: dict, where: Path) -> dict:
    repo = git_init(where / "git")
    blobs = b"".join(b"blob\nmark :%d\ndata %d\nvalue %d\n" % (i + 1, len(b"value %d" % i), i) for i in range(17))
    lines = [b"M 100644 :%d %s\n" % (i % 16 + 1, name.encode()) for i, name in enumerate(names)]
    stream = blobs + _commit("refs/heads/base", None, lines, 100)
    build, _ = timed(lambda: _fast_import(repo, stream))
    updates = [
        _commit(
            "refs/heads/up",
            "refs/heads/base" if k == 0 else None,
            [b"M 100644 :%d %s\n" % ((k + 1) % 16 + 1, n.encode())],
            200 + k,
        )
        for k, n in enumerate(picks["update"])
    ]
    update = timed(lambda: _fast_import(repo, blobs + b"".join(updates)))[0]
    tree = git("rev-parse", "refs/heads/base^{tree}", cwd=repo).decode().strip()
    queries = b"".join(b"%s:%s\n" % (tree.encode(), n.encode()) for n in picks["get"])
    get = timed(lambda: git("cat-file", "--batch-check", cwd=repo, input=queries))[0]
    diffs = {}
    for k, changed in picks["diff"].items():
        edits = [b"M 100644 :%d %s\n" % (17, n.encode()) for n in changed]
        _fast_import(repo, blobs + _commit(f"refs/heads/diff{k}", "refs/heads/base", edits, 100))
        diffs[k], out = timed(lambda k=k: git("diff-tree", "-r", "refs/heads/base", f"refs/heads/diff{k}", cwd=repo))
        assert out.count(b"\n") == k
    items, _ = timed(lambda: git("ls-tree", "-r", tree, cwd=repo))
    return {"build": build, "update": update, "get": get, "diff": diffs, "items": items * ITEMS / len(names)}


def disk_build(names: list[str], where: Path) -> float:
    repo = Repo.init(where / "reel")
    values = [repo.objects.put(Blob(b"value %d" % i)) for i in range(16)]
    ns = Namespace(repo.objects)
    content = {name: values[i % 16] for i, name in enumerate(names)}
    return timed(lambda: ns.update(ns.empty(), content))[0]


def run(n: int, disk: bool) -> None:
    names = make_names(n)
    rng = random.Random(n)
    picks = {
        "update": [rng.choice(names) for _ in range(UPDATES)],
        "get": [rng.choice(names) for _ in range(GETS)],
        "diff": {k: rng.sample(names, k) for k in DIFF_KS if k <= n},
    }
    notes: list[str] = []
    ours = bench_reelstore(names, picks, notes)
    dul = bench_dulwich(names, picks)
    with scratch() as where:
        gits = bench_git(names, picks, where)
        disk_time = disk_build(names, where) if disk else None
    table = Table(f"namespace, {n:,} names")
    table.add("build, one batched update", ours["build"], gits["build"], dul["build"])
    if disk_time is not None:
        table.add("build on disk (loose, fsync)", disk_time, gits["build"], dul["build"])
    table.add(f"{UPDATES} point updates, one name each", ours["update"], gits["update"], dul["update"])
    table.add(f"{GETS} gets", ours["get"], gits["get"], dul["get"])
    for k in picks["diff"]:
        table.add(f"diff, {k} names differ", ours["diff"][k], gits["diff"][k], dul["diff"][k])
    table.add(f"items, per {ITEMS:,} names", ours["items"], gits["items"], dul["items"])
    table.print()
    for note in notes:
        print(f"   {note}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 1_000_000])
    parser.add_argument("--disk-sizes", type=int, nargs="*", default=[1000])
    args = parser.parse_args()
    for n in args.sizes:
        run(n, n in args.disk_sizes)


if __name__ == "__main__":
    main()
