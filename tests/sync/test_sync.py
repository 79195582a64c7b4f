"""Sync through real git: bare repositories by path and file://, `git fsck` on the remote, and a
tampered remote refused with E007. The git daemon and the CLI are in test_sync_daemon/test_sync_cli."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from gitserver import bare, fsck, git
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from test_sync_outgoing import pack_bytes

from reelstore import sync
from reelstore.backend.repo import Repo
from reelstore.codec import FrozenMap
from reelstore.errors import NotFound, RemoteConflict, StorageError
from reelstore.maintenance.fsck import fsck as reel_fsck
from reelstore.objects import Blob, Hash, Record, Tree, View
from reelstore.sync.outgoing import OutgoingPack


def grow(repo: Repo, n: int, tag: str, trunk: str = "main") -> Hash:
    """Commit `n` new blobs on `trunk` (a record on top of the current one); returns the record."""
    blobs = [Blob(f"{tag}-{i}".encode()) for i in range(n)]
    tree = Tree(0, tuple(sorted((f"{tag}{i:05}", b.id) for i, b in enumerate(blobs))))
    ref = f"refs/heads/{trunk}"
    rec = Record(repo.refs[ref], tree.id, message=tag, time=len(tag))
    repo.objects.put_many([*blobs, tree, rec])
    repo.refs.set(ref, rec.id, repo.refs[ref])
    return rec.id


def add_view(repo: Repo, name: str) -> Hash:
    rec = repo.refs["refs/heads/main"]
    view = View("main", rec, repo.objects.get(rec).namespace)
    repo.objects.put(view)
    repo.refs.set(f"refs/views/{name}", view.id, None)
    return view.id


def reread_all(repo: Repo) -> int:
    """Read (and so re-hash and decode) every object; returns how many."""
    ids = list(repo.objects)
    for h in ids:
        repo.objects.get(h)
    return len(ids)


def closure(repo: Repo, start: Hash) -> set[Hash]:
    seen, stack = set(), [start]
    while stack:
        h = stack.pop()
        if h not in seen:
            seen.add(h)
            stack.extend(repo.objects.get(h).references())
    return seen


@pytest.fixture
def remote(tmp_path: Path) -> Path:
    return bare(tmp_path / "remote.git")


@pytest.fixture
def store_a(tmp_path: Path, remote: Path) -> Repo:
    repo = Repo.init(tmp_path / "a")
    sync.add_remote(repo, "origin", str(remote))
    return repo


@pytest.mark.parametrize("scheme", ["path", "file", "in-process"])
def test_push_then_clone_gives_the_same_refs_and_objects(
    tmp_path: Path, remote: Path, scheme: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"file://{remote}" if scheme == "file" else str(remote)
    if scheme == "in-process":  # no git on PATH: dulwich serves the local repository itself
        monkeypatch.setenv("PATH", str(tmp_path))
    a = Repo.init(tmp_path / "a")
    sync.add_remote(a, "origin", url)
    grow(a, 40, "one")
    view = add_view(a, "agent")
    pushed = sync.push(a, "origin")
    assert {r.ref: r.status for r in pushed.refs} == {"refs/heads/main": "new", "refs/views/agent": "new"}
    fsck(remote)
    assert git("--git-dir", str(remote), "for-each-ref", "--format=%(refname)").split() == [
        "refs/reel/heads/main",
        "refs/reel/views/agent",
    ]

    b, fetched = sync.clone(url, tmp_path / "b")
    for name in ("refs/heads/main", "refs/views/agent"):
        assert b.refs[name] == a.refs[name]
        assert closure(b, b.refs[name]) == closure(a, a.refs[name])
    assert b.refs["refs/views/agent"] == view
    assert b.refs["refs/remotes/origin/heads/main"] == a.refs["refs/heads/main"]
    assert set(a.objects) <= set(b.objects)
    assert reread_all(b) >= reread_all(a)
    assert reel_fsck(a).clean and reel_fsck(b).clean
    assert sync.list_remotes(b) == [("origin", url)]


def test_incremental_push_sends_only_new_objects(store_a: Repo, remote: Path) -> None:
    grow(store_a, 300, "big")
    first = sync.push(store_a, "origin")
    assert first.objects == 300 + 2 + 2  # blobs, tree, record, plus the root record and empty tree
    assert sync.push(store_a, "origin").commit is None
    grow(store_a, 5, "small")
    second = sync.push(store_a, "origin")
    assert second.objects == 5 + 2
    g = ("--git-dir", str(remote))
    assert git(*g, "rev-parse", "refs/reel/heads/main^").strip() == first.commit
    names = git(*g, "ls-tree", "-r", "--name-only", "refs/reel/heads/main").split()
    assert len([n for n in names if n.startswith("objects/")]) == 7 and "refs" in names
    fsck(remote)


def test_an_incremental_push_reads_only_what_it_sends(
    store_a: Repo, remote: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Onto a remote holding 2,000 objects, 5 new files: the walk reads each object it sends once and
    nothing else (it stops at the first object the remote is known to hold)."""
    from reelstore.namespace.tree import Namespace

    def add(n: int, tag: str) -> None:
        blobs = [Blob(f"{tag}-{i}".encode()) for i in range(n)]
        head = store_a.refs["refs/heads/main"]
        top = store_a.objects.get_as(head, Record)
        root = Namespace(store_a.objects).update(top.namespace, {f"{tag}/{i:05}": b.id for i, b in enumerate(blobs)})
        store_a.objects.put_many(blobs)
        rec = Record(head, root, message=tag, time=n)
        store_a.objects.put(rec)
        store_a.refs.set("refs/heads/main", rec.id, head)

    add(2000, "old")
    sync.push(store_a, "origin")
    add(5, "new")
    reads: list[Hash] = []
    get_raw = store_a.objects.get_raw
    monkeypatch.setattr(store_a.objects, "get_raw", lambda h: reads.append(h) or get_raw(h))
    pushed = sync.push(store_a, "origin")
    assert 5 < pushed.objects < 40
    assert len(reads) == len(set(reads)) == pushed.objects
    fsck(remote)


def test_fetch_brings_what_another_store_pushed(tmp_path: Path, store_a: Repo, remote: Path) -> None:
    grow(store_a, 10, "a1")
    sync.push(store_a, "origin")
    b, _ = sync.clone(str(remote), tmp_path / "b")
    rec = grow(store_a, 7, "a2")
    sync.push(store_a, "origin")
    got = sync.fetch(b, "origin")
    assert got.objects == 7 + 2
    assert got.updated == ["refs/remotes/origin/heads/main"]
    assert b.refs["refs/remotes/origin/heads/main"] == rec
    # b had not diverged, so its trunk fast-forwards (and its reflog does not claim the records)
    assert b.refs["refs/heads/main"] == rec and [t.status for t in got.trunks] == ["fast-forward"]
    assert not b.refs.reflog("refs/heads/main")[-1].message.startswith("commit ")
    again = sync.fetch(b, "origin")
    assert again.objects == 0 and again.updated == [] and [t.status for t in again.trunks] == ["up-to-date"]
    later = grow(store_a, 1, "a3")
    sync.push(store_a, "origin")
    sync.fetch(b, "origin", catch_up=False)
    assert b.refs["refs/heads/main"] == rec != later
    # b's trunk is behind the remote's: a push of everything skips it rather than rewind the remote
    result = sync.push(b, "origin")
    assert result.commit is None and [r.status for r in result.refs] == ["behind"]


def test_stale_push_loses_the_remote_cas(tmp_path: Path, store_a: Repo, remote: Path) -> None:
    grow(store_a, 3, "base")
    sync.push(store_a, "origin")
    b, _ = sync.clone(str(remote), tmp_path / "b")
    grow(store_a, 3, "a-wins")
    sync.push(store_a, "origin")
    remote_head = git("--git-dir", str(remote), "rev-parse", "refs/reel/heads/main")
    b_before = (b.refs["refs/heads/main"], b.refs["refs/remotes/origin/heads/main"], len(list(b.objects)))
    grow(b, 3, "b-loses")
    b_tracking = b.refs["refs/remotes/origin/heads/main"]
    with pytest.raises(RemoteConflict) as err:
        sync.push(b, "origin")
    assert err.value.exit_status == 5
    assert git("--git-dir", str(remote), "rev-parse", "refs/reel/heads/main") == remote_head
    assert b.refs["refs/remotes/origin/heads/main"] == b_tracking == b_before[1]
    # once b has fetched, its trunk has diverged from the remote's: refused before anything is sent
    sync.fetch(b, "origin")
    with pytest.raises(RemoteConflict, match="different history"):
        sync.push(b, "origin")
    fsck(remote)


def test_advance_remote_trunk_is_a_compare_and_swap(tmp_path: Path, store_a: Repo, remote: Path) -> None:
    base = grow(store_a, 2, "base")
    sync.push(store_a, "origin")
    b, _ = sync.clone(str(remote), tmp_path / "b")
    rec_a = grow(store_a, 1, "from-a")
    rec_b = grow(b, 1, "from-b")
    won = sync.advance_remote_trunk(store_a, "origin", "main", base, rec_a)
    assert won.commit and store_a.refs["refs/remotes/origin/heads/main"] == rec_a
    with pytest.raises(RemoteConflict):
        sync.advance_remote_trunk(b, "origin", "main", base, rec_b)
    assert b.refs["refs/remotes/origin/heads/main"] == base
    with pytest.raises(RemoteConflict, match="`reel fetch origin` first"):
        sync.advance_remote_trunk(store_a, "origin", "main", base, rec_a)
    sync.fetch(b, "origin")
    assert b.refs["refs/remotes/origin/heads/main"] == rec_a
    fsck(remote)


def test_remote_recreated_empty_gets_a_full_push(store_a: Repo, remote: Path) -> None:
    grow(store_a, 4, "x")
    sync.push(store_a, "origin")
    subprocess.run(["rm", "-rf", str(remote)], check=True)
    bare(remote)
    grow(store_a, 1, "y")
    result = sync.push(store_a, "origin")
    assert result.objects == len(closure(store_a, store_a.refs["refs/heads/main"]))
    fsck(remote)


def _plant(remote: Path, name: str, content: bytes, target: str) -> None:
    """Write a sync commit by hand with git plumbing: one object `name` holding `content`."""
    g = ("--git-dir", str(remote))
    blob = git(*g, "hash-object", "-w", "--stdin", input=content).strip()
    shard = git(*g, "mktree", input=f"100644 blob {blob}\t{name[2:]}\n".encode()).strip()
    fanout = git(*g, "mktree", input=f"040000 tree {shard}\t{name[:2]}\n".encode()).strip()
    refs = git(*g, "hash-object", "-w", "--stdin", input=f"{target} refs/heads/main\n".encode()).strip()
    root = git(*g, "mktree", input=f"040000 tree {fanout}\tobjects\n100644 blob {refs}\trefs\n".encode()).strip()
    commit = git(*g, "commit-tree", root, "-m", "planted").strip()
    git(*g, "update-ref", "refs/reel/heads/main", commit)


@pytest.mark.parametrize("fault", ["wrong-name", "not-an-object", "missing"])
def test_tampered_remote_is_refused_and_nothing_is_stored(tmp_path: Path, remote: Path, fault: str) -> None:
    good = Blob(b"honest")
    evil = Blob(b"evil")
    if fault == "wrong-name":
        _plant(remote, good.id.hex(), evil.encode(), good.id.hex())
    elif fault == "not-an-object":
        raw = b"not a reel object"
        _plant(remote, Hash.of(raw).hex(), raw, Hash.of(raw).hex())
    else:
        _plant(remote, good.id.hex(), good.encode(), evil.id.hex())
    b = Repo.init(tmp_path / "b")
    sync.add_remote(b, "origin", str(remote))
    before = sorted(b.objects)
    with pytest.raises(StorageError) as err:
        sync.fetch(b, "origin")
    assert err.value.code == "E007"
    assert sorted(b.objects) == before
    assert b.refs.list("refs/remotes/") == []
    with pytest.raises(StorageError):
        sync.clone(str(remote), tmp_path / "c")
    assert not (tmp_path / "c").exists()


def test_a_remote_trunk_at_a_blob_is_refused_by_fetch_and_clone(tmp_path: Path, remote: Path) -> None:
    """Finding 8 of issue 11: a well-formed remote whose trunk names a blob must not be cloned exit 0."""
    blob = Blob(b"a blob, not a record")
    _plant(remote, blob.id.hex(), blob.encode(), blob.id.hex())
    b = Repo.init(tmp_path / "b")
    sync.add_remote(b, "origin", str(remote))
    before = sorted(b.objects)
    with pytest.raises(StorageError, match="must point at a record, not a blob"):
        sync.fetch(b, "origin")
    assert sorted(b.objects) == before and b.refs.list("refs/remotes/") == []
    with pytest.raises(StorageError, match="must point at a record"):
        sync.clone(str(remote), tmp_path / "c")
    assert not (tmp_path / "c").exists()


def test_remotes_are_configured_and_removed(store_a: Repo, remote: Path) -> None:
    grow(store_a, 1, "x")
    sync.push(store_a, "origin")
    assert store_a.refs.list("refs/remotes/origin/")
    assert sync.remove_remote(store_a, "origin") == 1
    assert store_a.refs.list("refs/remotes/") == [] and sync.list_remotes(store_a) == []
    with pytest.raises(NotFound):
        sync.push(store_a, "origin")


def test_fetch_refills_objects_this_store_dropped(tmp_path: Path, store_a: Repo, remote: Path) -> None:
    grow(store_a, 3, "kept")
    sync.push(store_a, "origin")
    b, _ = sync.clone(str(remote), tmp_path / "b")
    dropped = Blob(b"kept-1").id
    b.objects.delete(dropped)
    assert not b.objects.has(dropped)
    tree = Tree(0, (("again", dropped),))  # new, and points at the dropped blob, which the remote has
    view = View("main", store_a.refs["refs/heads/main"], tree.id)
    store_a.objects.put_many([tree, view])
    store_a.refs.set("refs/views/again", view.id, None)
    assert sync.push(store_a, "origin").objects == 2
    sync.fetch(b, "origin")
    assert b.objects.get(dropped) == Blob(b"kept-1")


def test_pointing_a_remote_elsewhere_forgets_what_was_known(tmp_path: Path, store_a: Repo) -> None:
    grow(store_a, 3, "x")
    sync.push(store_a, "origin")
    other = bare(tmp_path / "other.git")
    store_a.config.set("remote.origin.url", str(other))
    result = sync.push(store_a, "origin")
    assert result.objects == len(closure(store_a, store_a.refs["refs/heads/main"]))
    fsck(other)


def test_binding_a_remote_to_the_url_it_has_writes_nothing(tmp_path: Path, store_a: Repo) -> None:
    """Every push binds its remote's facts to the URL; once recorded, that is a read alone (no write
    transaction) and the facts stay; another URL forgets them."""
    from reelstore.sync.state import SyncState

    grow(store_a, 3, "x")
    sync.push(store_a, "origin")
    url = sync.list_remotes(store_a)[0][1]
    state = SyncState(store_a)
    try:
        state.bind("origin", url)
        assert state.db.total_changes == 0
        assert state.knows_any("origin")
        state.bind("origin", str(tmp_path / "elsewhere.git"))
        assert state.db.total_changes > 0 and not state.knows_any("origin")
    finally:
        state.close()


@pytest.mark.parametrize("engine", ["git", "dulwich"])
def test_damaged_packs_are_e007(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, engine: str) -> None:
    from reelstore.sync import incoming
    from reelstore.sync.unpack import unpack

    if engine == "dulwich":  # no git on PATH: dulwich reads the pack in Python
        monkeypatch.setenv("PATH", str(tmp_path))
    assert incoming.git_tools() == (engine == "git")
    objs = [Blob(b"pack %d" % i) for i in range(20)]
    out = OutgoingPack()
    for o in objs:
        out.add_object(o.id, o.encode())
    commit = out.finish({"refs/heads/main": objs[0].id}, [])
    good = pack_bytes(out)
    path = tmp_path / "received.pack"
    path.write_bytes(good)
    got = unpack(incoming.read_pack(path), lambda _h: False)
    assert set(got.raws) == {o.id for o in objs}
    assert got.commits == {commit: {"refs/heads/main": objs[0].id}}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["received.pack"]
    flipped = bytearray(good)
    flipped[len(good) // 2] ^= 0xFF
    trailer = good[:-1] + bytes([good[-1] ^ 1])
    for bad in (good[: len(good) // 2], bytes(flipped), trailer, b"PACK" + good[4:12], b"garbage"):
        path.write_bytes(bad)
        with pytest.raises(StorageError):
            incoming.read_pack(path)
        assert sorted(p.name for p in tmp_path.iterdir()) == ["received.pack"]


def test_fetch_size_is_bounded(tmp_path: Path, store_a: Repo, remote: Path) -> None:
    grow(store_a, 50, "bulk")
    sync.push(store_a, "origin")
    b = Repo.init(tmp_path / "b")
    sync.add_remote(b, "origin", str(remote))
    b.config.set("sync.maxFetchBytes", "1000")
    before = sorted(b.objects)
    with pytest.raises(StorageError, match="maxFetchBytes"):
        sync.fetch(b, "origin")
    assert sorted(b.objects) == before
    b.config.set("sync.maxFetchBytes", str(1 << 20))
    assert sync.fetch(b, "origin").objects == 54


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    steps=st.lists(
        st.tuples(st.integers(0, 1), st.integers(0, 6), st.sampled_from(["push", "fetch"])), min_size=1, max_size=6
    )
)
@example(steps=[(0, 0, "push"), (1, 0, "push"), (0, 0, "fetch"), (0, 0, "push")])  # a fan-out tree our haves reach
def test_interleaved_pushes_and_fetches_keep_every_closure(
    tmp_path_factory: pytest.TempPathFactory, steps: list[tuple[int, int, str]]
) -> None:
    """Two stores, each owning one view, push and fetch in any order; a fresh clone then holds the
    complete closure of every ref, and the remote stays fsck-clean."""
    tmp = tmp_path_factory.mktemp("interleave")
    remote = bare(tmp / "r.git")
    stores = [Repo.init(tmp / "s0"), Repo.init(tmp / "s1")]
    for i, s in enumerate(stores):
        sync.add_remote(s, "origin", str(remote))
        s.refs.set(f"refs/views/v{i}", add_view_object(s, f"start{i}"), None)
    for n, (who, count, action) in enumerate(steps):
        s = stores[who]
        if action == "push":
            blobs = [Blob(f"{who}-{n}-{k}".encode()) for k in range(count)]
            s.refs.set(f"refs/views/v{who}", add_view_object(s, f"{who}-{n}", blobs), s.refs[f"refs/views/v{who}"])
            sync.push(s, "origin", [f"refs/views/v{who}"])
        else:
            sync.fetch(s, "origin")
    fsck(remote)
    clone, _ = sync.clone(str(remote), tmp / "clone")
    pushed = {
        f"refs/views/v{i}": s.refs[f"refs/views/v{i}"]
        for i, s in enumerate(stores)
        if s.refs.get(f"refs/remotes/origin/views/v{i}") is not None
    }
    assert {name: h for name, h in clone.refs.list("refs/views/")} == pushed
    for s in stores:
        sync.fetch(s, "origin")
        for name, h in pushed.items():
            assert s.refs[name.replace("refs/", "refs/remotes/origin/")] == h
            assert closure(s, h) == closure(clone, h)


def add_view_object(repo: Repo, tag: str, blobs: list[Blob] = ()) -> Hash:
    tree = Tree(0, tuple(sorted((f"{tag}-{k}", b.id) for k, b in enumerate(blobs))))
    view = View("main", repo.refs["refs/heads/main"], tree.id, meta=FrozenMap({"tag": tag}))
    repo.objects.put_many([*blobs, tree, view])
    return view.id


def test_a_refs_file_our_haves_reach_makes_the_fetch_start_over(tmp_path: Path, remote: Path) -> None:
    """A ref moved back to an earlier value yields a refs file identical to one we already have; git
    then leaves it out of the pack, and the fetch must redo itself without haves to read it."""
    a, b = Repo.init(tmp_path / "a"), Repo.init(tmp_path / "b")
    for s in (a, b):
        sync.add_remote(s, "origin", str(remote))
    first = add_view_object(a, "x", [Blob(b"one")])
    a.refs.set("refs/views/v", first, None)
    sync.push(a, "origin", ["refs/views/v"])
    sync.fetch(b, "origin")
    second = add_view_object(a, "y", [Blob(b"two")])
    a.refs.set("refs/views/v", second, first)
    sync.push(a, "origin", ["refs/views/v"])
    a.refs.set("refs/views/v", first, second)
    sync.push(a, "origin", ["refs/views/v"])
    assert sync.fetch(b, "origin").refs["refs/remotes/origin/views/v"] == first
    assert closure(b, second) == closure(a, second)
