"""gc beside a live writer: a real process keeps writing objects and moving refs while gc runs again and
again with a short grace period; no object any ref reaches is ever lost, and the garbage does go.

The writer runs until the test has seen what it needs (gc runs that pruned, the writer well under way),
not for a fixed time: on a loaded machine a fixed window can close before any garbage is old enough."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from conftest import REEL

from reelstore.backend.repo import Repo
from reelstore.maintenance.fsck import fsck
from reelstore.maintenance.gc import gc
from reelstore.maintenance.reach import ref_roots, walk
from reelstore.objects import Blob, Record

WRITER = r"""
import os, sys, time
from reelstore.objects import Blob, Record, Tree, View
from reelstore.backend.repo import Repo

repo = Repo.open(sys.argv[1])
stop = sys.argv[2]
deadline = time.monotonic() + float(sys.argv[3])
rec = repo.refs["refs/heads/main"]
files = {}
side = None
i = 0
while time.monotonic() < deadline and i < 100000 and not (i > 40 and os.path.exists(stop)):
    repo.objects.put(Blob(b"garbage %d" % i))
    blob = Blob(b"content %d" % i)
    files[f"f{i % 7}"] = blob.id
    batch = [blob]
    if i == 25:
        bulk = [Blob(b"bulk %d" % k) for k in range(1000)]
        batch += bulk
        files.update((f"bulk{k:04}", b.id) for k, b in enumerate(bulk))
    tree = Tree(0, tuple(sorted(files.items())))
    new = Record(rec, tree.id, message=str(i), time=i)
    repo.objects.put_many(batch + [tree, new])
    repo.refs.set("refs/heads/main", new.id, rec)
    assert repo.objects.get(rec).id == rec
    rec = new.id
    if i % 5 == 0:
        # A view ref that comes and goes: its own blob is unreachable between delete and re-create,
        # and the writer re-puts it (freshening it) before pointing a ref at it again.
        if side is None:
            side = Blob(b"side %d" % i)
        if repo.refs.get("refs/views/side") is not None:
            repo.refs.delete("refs/views/side")
        time.sleep(0.01)
        stree = Tree(0, (("side", side.id),))
        view = View(parent="main", base=rec, namespace=stree.id)
        repo.objects.put_many([side, stree, view])
        repo.refs.set("refs/views/side", view.id, None)
        assert repo.objects.get(side.id) == side
    i += 1
print(i)
"""


def test_gc_beside_a_live_writer_loses_nothing_reachable(tmp_path: Path) -> None:
    repo = Repo.init(tmp_path)
    repo.config.set("core.fsync", "false")
    repo.config.save()
    script, stop = tmp_path / "writer.py", tmp_path / "stop"
    script.write_text(WRITER)
    writer = subprocess.Popen(
        [sys.executable, str(script), str(repo.path), str(stop), "120"], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    runs = pruned = 0
    try:
        deadline = time.monotonic() + 90
        while writer.poll() is None and time.monotonic() < deadline:
            pruned += gc(Repo.open(repo.path), "2.seconds.ago", wait_s=5).pruned
            runs += 1
            if runs >= 3 and pruned >= 1 and _writer_progress(repo.path) > 40:
                break  # gc pruned beside the writer, which is past its bulk write: enough seen
            time.sleep(0.2)
        stop.touch()
        out, err = writer.communicate(timeout=60)
    finally:
        if writer.poll() is None:
            writer.kill()
            writer.wait()
    assert writer.returncode == 0, err.decode()
    iterations = int(out)
    assert iterations > 40 and runs >= 3 and pruned >= 1, (iterations, runs, pruned)
    final = Repo.open(repo.path)
    w = walk(final.objects, ref_roots(final.refs, 0))
    assert w.complete, (list(w.missing.items())[:3], list(w.damaged.items())[:3])
    report = gc(final, "now")
    assert report.pruned >= 1
    assert not final.objects.has(Blob(b"garbage 0").id)
    assert final.objects.has(Blob(b"bulk 999").id)
    assert fsck(Repo.open(repo.path)).clean


def _writer_progress(path: Path) -> int:
    """The writer's last iteration, read from the record its trunk points at (its message is the count)."""
    repo = Repo.open(path)
    message = repo.objects.get_as(repo.refs["refs/heads/main"], Record).message
    return int(message) if message.isdigit() else -1


def test_gc_killed_at_any_point_loses_nothing_reachable(tmp_path: Path) -> None:
    import os
    import signal

    from reelstore.objects import Tree

    repo = Repo.init(tmp_path)
    repo.config.set("core.fsync", "false")
    repo.config.save()
    reel = REEL
    env = {k: v for k, v in os.environ.items() if k != "REEL_DIR"}
    for round_, delay in enumerate((0.3, 0.6, 0.9, 1.2, 1.6)):
        live = Repo.open(repo.path)
        live.objects.loose.fsync = False
        blobs = [Blob(b"round %d blob %d" % (round_, i)) for i in range(600)]
        tree = Tree(0, tuple((f"r{round_}/{i:04}", b.id) for i, b in enumerate(blobs[:300])))
        rec = Record(live.refs["refs/heads/main"], tree.id, message=f"round {round_}")
        live.objects.loose.put_many([*blobs, tree, rec])
        live.refs.set("refs/heads/main", rec.id)
        proc = subprocess.Popen(
            [reel, "-C", str(tmp_path), "gc", "--prune=now"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        after = Repo.open(repo.path)
        w = walk(after.objects, ref_roots(after.refs, 0))
        assert w.complete, (round_, list(w.missing.items())[:3], list(w.damaged.items())[:3])
    final = Repo.open(repo.path)
    gc(final, "now")
    report = fsck(Repo.open(repo.path))
    assert report.clean and report.unreachable == []
    assert not (repo.path / "gc.lock").exists()


COMMITTER = r"""
import json, sys
from reelstore.api import Store
from reelstore.errors import Conflict

store = Store.open(sys.argv[1])
me, cycles = sys.argv[2], int(sys.argv[3])
done = []
for i in range(cycles):
    for attempt in range(50):
        view = store.fork(f"w{me}-{i}-{attempt}")
        view.put(f"{me}/f{i % 3}", f"writer {me} cycle {i}\n" * 20)
        view.put(f"{me}/same", "content every cycle writes again\n")
        try:
            result = view.commit(f"{me} {i}")
        except Conflict:
            continue
        done.append(result.record.hex())
        break
print(json.dumps(done))
"""


def test_gc_prune_now_beside_committers_loses_no_committed_record(tmp_path: Path) -> None:
    """Issue 11 finding 1: `gc --prune=now` looping beside several committers must never delete what a
    commit reported committed (an object written before gc listed it, referenced after gc marked)."""
    import json

    from reelstore.objects import Hash

    Repo.init(tmp_path).config.set("core.fsync", "false")
    script = tmp_path / "committer.py"
    script.write_text(COMMITTER)
    writers = [
        subprocess.Popen(
            [sys.executable, str(script), str(tmp_path), str(w), "12"], stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        for w in range(3)
    ]
    runs = 0
    try:
        deadline = time.monotonic() + 120
        while any(p.poll() is None for p in writers) and time.monotonic() < deadline:
            gc(Repo.open(tmp_path), "now", wait_s=5)
            runs += 1
        outs = [p.communicate(timeout=60) for p in writers]
    finally:
        for p in writers:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert all(p.returncode == 0 for p in writers), [err.decode()[-2000:] for _, err in outs]
    committed = [Hash.from_hex(h) for out, _ in outs for h in json.loads(out)]
    assert len(committed) == 36 and runs >= 2
    final = Repo.open(tmp_path)
    chain = set()
    head: Hash | None = final.refs["refs/heads/main"]
    while head is not None:
        chain.add(head)
        head = final.objects.get_as(head, Record).parent
    lost = [h.hex() for h in committed if h not in chain]
    assert lost == [], f"{len(lost)} committed records lost"
    assert fsck(Repo.open(tmp_path)).clean
