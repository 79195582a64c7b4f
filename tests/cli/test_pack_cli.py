"""The pack commands end to end: pack-objects, verify-pack -v, index-pack, unpack-objects, repack, prune,
count-objects, rev-list, ls-tree, gc — and damage caught with exit 3."""

from __future__ import annotations

import json
import os
from pathlib import Path

from reelstore.backend.packs.pack_verify import verify_pack
from reelstore.backend.repo import Repo
from reelstore.objects import Blob, Hash, Record, Tree


def populate(repo: Repo, versions: int = 4) -> list[Hash]:
    """A short trunk history over two files; returns every id it wrote (the root record's included)."""
    ids = [repo.refs["refs/heads/main"], Tree(0, ()).id]
    rec = ids[0]
    for v in range(versions):
        a = Blob(("alpha\n" * 50 + f"v{v}\n").encode())
        b = Blob(f"beta {v}".encode())
        tree = Tree(0, (("a.txt", a.id), ("b.txt", b.id)))
        new = Record(rec, tree.id, author="t", message=f"v{v}", time=v)
        repo.objects.put_many([a, b, tree, new])
        repo.refs.set("refs/heads/main", new.id, rec)
        ids += [a.id, b.id, tree.id, new.id]
        rec = new.id
    return ids


def flip(path: Path, at: int) -> None:
    os.chmod(path, 0o644)
    data = bytearray(path.read_bytes())
    data[at] ^= 0xFF
    path.write_bytes(bytes(data))


def test_pack_objects_verify_index_unpack_round_trip(tmp_path: Path, run, reel) -> None:
    repo = Repo.init(tmp_path)
    ids = populate(repo)
    res = run("pack-objects", "--all")
    assert res.exit_code == 0, res.output
    name = res.output.strip()
    pack = tmp_path / ".reel/objects/pack" / f"{name}.pack"
    assert pack.is_file() and pack.with_suffix(".idx").is_file()
    res = run("verify-pack", "-v", str(pack))
    assert res.exit_code == 0, res.output
    lines = [ln for ln in res.output.splitlines() if len(ln.split()) in (5, 7) and len(ln.split()[0]) == 64]
    assert {Hash.from_hex(ln.split()[0]) for ln in lines} == set(ids)
    assert res.output.rstrip().endswith(": ok")
    doc = json.loads(run("--json", "verify-pack", "-v", str(pack)).output)
    assert doc["packs"][0]["count"] == len(set(ids)) and len(doc["packs"][0]["entries"]) == len(set(ids))
    # index-pack rebuilds an index that reads the same objects.
    copy = tmp_path / "copy.pack"
    copy.write_bytes(pack.read_bytes())
    assert run("index-pack", str(copy)).exit_code == 0
    assert run("verify-pack", str(copy)).exit_code == 0
    # A pack on stdout unpacks into another store, every object re-hashed.
    data = reel("pack-objects", "--stdout", "--all", check=True).stdout
    assert data[:4] == b"RPAK"
    other = tmp_path / "other"
    other.mkdir()
    reel("init", cwd=other, check=True)
    out = reel("unpack-objects", input=data, cwd=other, check=True)
    assert f"unpacked {len(set(ids))} objects" in out.stdout.decode()
    back = Repo.open(other)
    assert all(back.objects.has(h) for h in ids)
    stored = reel("index-pack", "--stdin", input=data, cwd=other, check=True)
    assert len(stored.stdout.decode().strip()) == 64


def test_pack_objects_from_stdin_ids(tmp_path: Path, run) -> None:
    repo = Repo.init(tmp_path)
    ids = populate(repo, 2)
    res = run("pack-objects", input="\n".join(h.hex() for h in ids[:3]) + "\n")
    assert res.exit_code == 0
    packs = Repo.open(tmp_path).objects.packs()
    assert len(packs) == 1 and set(packs[0].ids()) == set(ids[:3])
    missing = run("pack-objects", input=Blob(b"absent").id.hex() + "\n")
    assert missing.exit_code == 4


def test_rev_list_and_ls_tree(tmp_path: Path, run) -> None:
    repo = Repo.init(tmp_path)
    ids = populate(repo, 3)
    records = run("rev-list", "main").output.split()
    assert records == [h.hex() for h in reversed(ids[5::4])] + [ids[0].hex()]
    assert run("rev-list", "-n", "2", "main").output.split() == records[:2]
    objs = run("rev-list", "--objects", "--all").output.splitlines()
    assert {Hash.from_hex(ln.split()[0]) for ln in objs} == set(ids)
    assert any(ln.endswith(" a.txt") for ln in objs)
    listing = run("ls-tree", "-r", "main").output.splitlines()
    assert [ln.split("\t")[1] for ln in listing] == ["a.txt", "b.txt"]
    assert listing[1].split("\t")[0].split() == ["100644", "blob", ids[-3].hex()]
    assert run("ls-tree", ids[2].hex()).exit_code == 6


def test_repack_prune_count_objects(tmp_path: Path, run) -> None:
    repo = Repo.init(tmp_path)
    populate(repo, 2)
    junk = Blob(b"junk")
    repo.objects.put(junk)
    before = json.loads(run("--json", "count-objects", "-v").output)
    assert before["count"] == 11 and before["packs"] == 0
    assert run("repack", "-d").exit_code == 0
    after = json.loads(run("--json", "count-objects", "-v").output)
    assert after["count"] == 0 and after["in-pack"] == 11 and after["packs"] == 1 and after["size-pack"] >= 0
    repo.objects.put(Blob(b"junk 2"))
    res = run("prune", "--expire", "now", "-v")
    assert res.exit_code == 0 and "removed 1 object;" in res.output
    assert run("repack", "-a", "-d").exit_code == 0
    assert json.loads(run("--json", "count-objects", "-v").output)["packs"] == 1
    (tmp_path / ".reel/objects/pack/.tmp-stray").write_bytes(b"x")
    assert "garbage: 1" in run("count-objects", "-v").output
    res = run("gc", "--prune=now", "-v")
    assert res.exit_code == 0 and junk.id.hex() in res.output


def test_gc_dry_run_and_lock(tmp_path: Path, run, reel) -> None:
    repo = Repo.init(tmp_path)
    populate(repo, 1)
    junk = Blob(b"junk")
    repo.objects.put(junk)
    doc = json.loads(run("--json", "gc", "--prune=now", "--dry-run").output)
    assert doc["pruned_ids"] == [junk.id.hex()] and doc["dry_run"]
    assert Repo.open(tmp_path).objects.has(junk.id)
    (tmp_path / ".reel/gc.lock").write_text(f"{os.getpid()} {os.uname().nodename} 0\n")
    busy = reel("gc")
    assert busy.returncode == 5 and b"E002" in busy.stderr and b"another gc is running" in busy.stderr
    (tmp_path / ".reel/gc.lock").unlink()
    assert reel("gc", "--prune", "garbage-age").returncode == 6


def test_flipped_pack_byte_is_caught(tmp_path: Path, run, reel) -> None:
    repo = Repo.init(tmp_path)
    ids = populate(repo, 3)
    run("gc", "--prune=now")
    store = Repo.open(tmp_path).objects
    pack = store.packs()[0]
    infos, _ = verify_pack(pack)
    victim = next(
        i for i in infos if i.kind == "blob" and i.base is None and not any(j.base == i.offset for j in infos)
    )
    flip(pack.path, victim.offset + victim.packed - 2)
    res = reel("fsck")
    assert res.returncode == 3
    assert victim.id.hex().encode() in res.stdout and b"E007" in res.stderr
    res = reel("verify-pack", "-v")
    assert res.returncode == 3 and b"checksum mismatch" in res.stderr
    bad = reel("cat-file", "-p", victim.id.hex())
    assert bad.returncode == 3 and b"E007" in bad.stderr
    for h in ids:
        if h != victim.id:
            assert run("cat-file", "-e", h.hex()).exit_code == 0


def test_flipped_index_byte_and_lost_index(tmp_path: Path, reel) -> None:
    repo = Repo.init(tmp_path)
    populate(repo, 2)
    reel("gc", "--prune=now", check=True)
    idx = next((tmp_path / ".reel/objects/pack").glob("*.idx"))
    flip(idx, idx.stat().st_size - 70)
    res = reel("fsck")
    assert res.returncode == 3 and b"index checksum mismatch" in res.stdout
    idx.unlink()
    res = reel("fsck")
    assert res.returncode == 3 and b"pack has no index" in res.stdout
    res = reel("log")
    assert res.returncode != 0
