"""Packs, gc and packed reads, side by side with git (and dulwich where it has the operation).

    python3 bench/bench_packs.py [--objects 20000] [--files 40] [--versions 50]

1. repack 20,000 loose objects into one pack: `reel repack -a -d` vs `git repack -a -d` vs dulwich's
   pack_loose_objects (each from loose objects).
2. pack size on versioned text (many slightly edited versions of the same files, one commit/record
   per edit): `reel gc --prune=now` vs `git repack -a -d -f` (window 10, depth 50).
3. `gc --prune=now` with half of 20,000 objects unreachable: reel vs git.
4. `cat-file --batch` of every object of the packed store: reel vs git (and dulwich reading the same
   git pack in-process).

Targets: pack size <= git's on the versioned content; batch read >= 0.5x git's speed; gc <= 2x git's time.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
from pathlib import Path

from _util import Table, fast_import_blobs, git, git_init, payloads, reel, scratch, timed

from reelstore.backend.repo import Repo
from reelstore.objects import Blob, Record, Tree


def reel_store(path: Path) -> Repo:
    path.mkdir(parents=True, exist_ok=True)
    repo = Repo.init(path)
    repo.objects.loose.fsync = False
    return repo


def put_loose(repo: Repo, objs: list) -> None:
    repo.objects.loose.put_many(objs)


def git_loose(path: Path, data: list[bytes]) -> list[str]:
    """A git repo holding `data` as loose blobs; returns their ids."""
    src = git_init(path.with_name(path.name + "-src"))
    marks = src / "marks"
    git("fast-import", "--quiet", f"--export-marks={marks}", cwd=src, input=fast_import_blobs(data))
    ids = [line.split()[1] for line in marks.read_text().splitlines()]
    git_init(path)
    pack = next((src / "objects/pack").glob("*.pack"))
    git("unpack-objects", "-q", cwd=path, input=pack.read_bytes())
    return ids


def dulwich_pack_loose(path: Path, data: list[bytes]) -> float:
    from dulwich.objects import Blob as DBlob
    from dulwich.repo import Repo as DRepo

    path.mkdir(parents=True)
    drepo = DRepo.init_bare(str(path))
    for d in data:
        drepo.object_store.add_object(DBlob.from_string(d))
    seconds, _ = timed(drepo.object_store.pack_loose_objects)
    drepo.close()
    return seconds


def pack_size(pack_dir: Path) -> tuple[int, int]:
    packs = sum(p.stat().st_size for p in pack_dir.glob("*.pack"))
    idx = sum(p.stat().st_size for p in pack_dir.glob("*.idx"))
    return packs, idx


def versioned_history(files: int, versions: int, seed: int = 7) -> list[tuple[str, bytes]]:
    """(file name, new content) per edit: files start at ~200 lines; each edit changes 1-3 lines."""
    rnd = random.Random(seed)
    words = [f"w{i}" for i in range(3000)]

    def line() -> str:
        return " ".join(rnd.choice(words) for _ in range(rnd.randint(4, 12)))

    texts = {f"src/file{f:03}.txt": [line() for _ in range(200)] for f in range(files)}
    edits = []
    for name, text in texts.items():
        edits.append((name, ("\n".join(text) + "\n").encode()))
    for _version in range(versions - 1):
        for name, text in texts.items():
            for _ in range(rnd.randint(1, 3)):
                op = rnd.random()
                at = rnd.randrange(len(text))
                if op < 0.6:
                    text[at] = line()
                elif op < 0.8:
                    text.insert(at, line())
                elif len(text) > 10:
                    del text[at]
            edits.append((name, ("\n".join(text) + "\n").encode()))
    return edits


def git_history(path: Path, edits: list[tuple[str, bytes]]) -> None:
    parts = []
    for i, (name, data) in enumerate(edits, 1):
        parts.append(
            b"commit refs/heads/main\nmark :%d\ncommitter bench <b@example.invalid> %d +0000\n"
            b"data 4\nedit\n" % (i, 1700000000 + i)
        )
        if i > 1:
            parts.append(b"from :%d\n" % (i - 1))
        parts.append(b"M 100644 inline %s\ndata %d\n%s\n" % (name.encode(), len(data), data))
    git_init(path)
    git("fast-import", "--quiet", cwd=path, input=b"".join(parts))


def reel_history(repo: Repo, edits: list[tuple[str, bytes]]) -> None:
    files: dict = {}
    rec = repo.refs["refs/heads/main"]
    objs: list = []
    for i, (name, data) in enumerate(edits):
        blob = Blob(data)
        files[name] = blob.id
        tree = Tree(0, tuple(sorted(files.items())))
        new = Record(rec, tree.id, author="bench", message="edit", time=1700000000000 + i)
        objs += [blob, tree, new]
        rec = new.id
    put_loose(repo, objs)
    repo.refs.set("refs/heads/main", rec)


def reel_reference(repo: Repo, blobs: list[Blob]) -> None:
    """Make `blobs` reachable: one tree naming them all, one record on the trunk."""
    tree = Tree(0, tuple(sorted((f"f{i:06}", b.id) for i, b in enumerate(blobs))))
    rec = Record(repo.refs["refs/heads/main"], tree.id, message="reference")
    put_loose(repo, [tree, rec])
    repo.refs.set("refs/heads/main", rec.id)


def git_reference(path: Path, ids: list[str]) -> None:
    entries = b"".join(b"100644 blob %s\tf%06d\n" % (h.encode(), i) for i, h in enumerate(ids))
    tree_id = git("mktree", cwd=path, input=entries).decode().strip()
    commit = git("commit-tree", tree_id, "-m", "reference", cwd=path).decode().strip()
    git("update-ref", "refs/heads/main", commit, cwd=path)


def bench_repack(root: Path, n: int, table: Table) -> None:
    # Reachable objects: git's repack -a packs only what refs reach (loose garbage is left to prune).
    data = payloads(n, 50, 500, seed=3)
    repo = reel_store(root / "reel")
    blobs = [Blob(d) for d in data]
    put_loose(repo, blobs)
    reel_reference(repo, blobs)
    reel_s, _ = timed(lambda: reel("repack", "-a", "-d", cwd=root / "reel"))
    git_reference(root / "git", git_loose(root / "git", data))
    git_s, _ = timed(lambda: git("repack", "-a", "-d", "-q", cwd=root / "git"))
    assert not list((root / "git/objects").glob("??/*")), "git left loose objects"
    dul_s = dulwich_pack_loose(root / "dulwich", data)
    table.add(f"repack {n} loose objects", reel_s, git_s, dul_s)


def bench_versioned(root: Path, files: int, versions: int, table: Table) -> tuple[int, int]:
    edits = versioned_history(files, versions)
    raw = sum(len(d) for _, d in edits)
    repo = reel_store(root / "vreel")
    reel_history(repo, edits)
    reel_s, _ = timed(lambda: reel("gc", "--prune=now", cwd=root / "vreel"))
    git_history(root / "vgit", edits)
    git_s, _ = timed(lambda: git("repack", "-a", "-d", "-f", "-q", cwd=root / "vgit"))
    table.add(f"pack {len(edits)} edits of {files} files (reel gc vs git repack -adf)", reel_s, git_s)
    rp, ri = pack_size(root / "vreel/.reel/objects/pack")
    gp, gi = pack_size(root / "vgit/objects/pack")
    print(
        f"versioned content: {len(edits)} versions, {raw / 1e6:.2f} MB of text; "
        f"reel pack {rp} B (+ idx {ri} B), git pack {gp} B (+ idx {gi} B); "
        f"pack size reel/git = {rp / gp:.2f}x (target <= 1.00x: {'met' if rp <= gp else 'NOT met'}); "
        f"pack+idx reel/git = {(rp + ri) / (gp + gi):.2f}x"
    )
    return rp, gp


def bench_gc(root: Path, n: int, table: Table) -> float:
    data = payloads(n, 50, 500, seed=5)
    half = n // 2
    repo = reel_store(root / "greel")
    blobs = [Blob(d) for d in data]
    put_loose(repo, blobs)
    reel_reference(repo, blobs[:half])
    reel_s, _ = timed(lambda: reel("gc", "--prune=now", cwd=root / "greel"))
    after = Repo.open(root / "greel")
    kept = sum(1 for _ in after.objects)
    assert kept == half + 4, kept
    gpath = root / "ggit"
    git_reference(gpath, git_loose(gpath, data)[:half])
    git_s, _ = timed(lambda: git("gc", "--prune=now", "-q", cwd=gpath))
    table.add(f"gc --prune=now, {n} objects, half unreachable", reel_s, git_s)
    return reel_s / git_s


def bench_batch(root: Path, table: Table) -> float:
    """cat-file --batch over every object of the two packed stores left by bench_gc."""
    reel_ids = reel("cat-file", "--batch-check", "--batch-all-objects", cwd=root / "greel").split(b"\n")
    reel_in = b"\n".join(line.split(b" ")[0] for line in reel_ids if line) + b"\n"
    git_ids = git("cat-file", "--batch-check=%(objectname)", "--batch-all-objects", cwd=root / "ggit")
    reel_s, out = timed(lambda: reel("cat-file", "--batch", cwd=root / "greel", input=reel_in))
    git_s, _ = timed(lambda: git("cat-file", "--batch", cwd=root / "ggit", input=git_ids))
    assert b"missing" not in out
    from dulwich.repo import Repo as DRepo

    def dulwich_read() -> None:
        with DRepo(str(root / "ggit")) as drepo:
            for line in git_ids.split():
                drepo.object_store[line].as_raw_string()

    dul_s, _ = timed(dulwich_read)
    one, _ = timed(lambda: reel("cat-file", "--batch", cwd=root / "greel", input=reel_in.split(b"\n")[0] + b"\n"))
    table.add(f"cat-file --batch, {len(git_ids.split())} packed objects", reel_s, git_s, dul_s)
    table.add("  the same, less reel's start-up (a batch of one)", max(reel_s - one, 1e-6), git_s)
    return git_s / reel_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--objects", type=int, default=20000)
    parser.add_argument("--files", type=int, default=40)
    parser.add_argument("--versions", type=int, default=50)
    args = parser.parse_args()
    print(
        f"git: {subprocess.run(['git', '--version'], capture_output=True, text=True).stdout.strip()}, "
        f"python {sys.version.split()[0]}"
    )
    table = Table("packs, gc and packed reads (seconds; ratio = reel / other, lower is better)")
    with scratch("reelbench-packs-") as root:
        # Byte-compiled modules, as an installed reel has them (this sandbox sets PYTHONDONTWRITEBYTECODE).
        os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
        os.environ["PYTHONPYCACHEPREFIX"] = str(root / "pycache")
        reel("--help", cwd=root)
        startup, _ = timed(lambda: reel("--help", cwd=root))
        print(f"reel process start-up: {startup * 1000:.0f} ms (included in every reel figure below)")
        bench_repack(root, args.objects, table)
        reel_pack, git_pack = bench_versioned(root, args.files, args.versions, table)
        gc_ratio = bench_gc(root, args.objects, table)
        speed = bench_batch(root, table)
    table.print()
    print(
        f"targets: pack size reel/git {reel_pack / git_pack:.2f}x (<= 1.00x: "
        f"{'met' if reel_pack <= git_pack else 'NOT met'}); batch read speed reel/git {speed:.2f}x "
        f"(>= 0.50x: {'met' if speed >= 0.5 else 'NOT met'}); gc time reel/git {gc_ratio:.2f}x "
        f"(<= 2.00x: {'met' if gc_ratio <= 2 else 'NOT met'})"
    )


if __name__ == "__main__":
    main()
