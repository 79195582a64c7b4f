"""Reading received packs (`sync.incoming`): a pack without deltas in the size-checking pass, one with
deltas by git where it is installed and by dulwich where it is not; all three give the same objects."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from gitserver import bare, git
from hypothesis import given, settings
from hypothesis import strategies as st
from test_sync import closure

from reelstore import sync
from reelstore.backend.repo import Repo
from reelstore.errors import StorageError
from reelstore.objects import Blob, Hash, Record
from reelstore.sync import incoming
from reelstore.sync.unpack import canonical_blob, commit_links, tree_entries, unpack


def _similar(repo: Repo, n: int) -> Hash:
    """`n` blobs that differ in a few bytes each: git deltifies them against each other."""
    from reelstore.namespace.tree import Namespace

    blobs = [
        Blob(b"".join(b"line %d of a long file that barely changes\n" % j for j in range(200)) + b"%d" % i)
        for i in range(n)
    ]
    repo.objects.put_many(blobs)
    head = repo.refs["refs/heads/main"]
    top = repo.objects.get_as(head, Record)
    root = Namespace(repo.objects).update(top.namespace, {f"s/{i}": b.id for i, b in enumerate(blobs)})
    rec = Record(head, root, message="similar", time=1)
    repo.objects.put(rec)
    repo.refs.set("refs/heads/main", rec.id, head)
    return rec.id


def _delta_pack(tmp_path: Path) -> tuple[Path, Repo]:
    """A store pushed to a remote that git then repacked with deltas; the remote's one pack file."""
    remote = bare(tmp_path / "remote.git")
    a = Repo.init(tmp_path / "a")
    sync.add_remote(a, "origin", str(remote))
    _similar(a, 30)
    sync.push(a, "origin")
    git("--git-dir", str(remote), "repack", "-adf", "--window=50", "--depth=20")
    counts = git("--git-dir", str(remote), "verify-pack", "-v", *map(str, (remote / "objects/pack").glob("*.idx")))
    assert "chain length" in counts, "git did not deltify the similar blobs"
    (pack,) = (remote / "objects/pack").glob("*.pack")
    return pack, a


@pytest.mark.parametrize("engine", ["git", "dulwich"])
def test_a_pack_with_deltas_is_read_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, engine: str) -> None:
    pack, a = _delta_pack(tmp_path)
    received = tmp_path / "received.pack"
    shutil.copy(pack, received)
    if engine == "dulwich":
        monkeypatch.setenv("PATH", str(tmp_path / "no-git-here"))
    assert incoming.git_tools() == (engine == "git")
    got = unpack(incoming.read_pack(received), lambda _h: False)
    assert set(got.raws) == closure(a, a.refs["refs/heads/main"])
    assert all(Hash.of(raw) == rid for rid, raw in got.raws.items())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "received.pack", "remote.git"]


def test_clone_of_a_repacked_remote_gets_every_object(tmp_path: Path) -> None:
    _, a = _delta_pack(tmp_path)
    b, fetched = sync.clone(str(tmp_path / "remote.git"), tmp_path / "b")
    assert b.refs["refs/heads/main"] == a.refs["refs/heads/main"]
    assert closure(b, b.refs["refs/heads/main"]) == closure(a, a.refs["refs/heads/main"])
    assert fetched.objects == len(closure(a, a.refs["refs/heads/main"]))


def _decodes(raw: bytes) -> bool:
    from reelstore.errors import BadInput
    from reelstore.objects import decode

    try:
        return isinstance(decode(raw), Blob)
    except BadInput:
        return False


def _bin(head: int, length: int, off: int) -> bytes:
    """A msgpack-bin-like body: marker `head`, a declared length near the real one, `length` bytes."""
    width = {0xC4: 1, 0xC5: 2, 0xC6: 4}.get(head, 1)
    declared = max(0, length + off) % (1 << (8 * width))
    return bytes([head]) + declared.to_bytes(width, "big") + b"x" * length


@given(
    st.one_of(
        st.binary(max_size=40),
        st.builds(
            _bin,
            st.sampled_from([0xC4, 0xC5, 0xC6, 0xC7, 0x00]),
            st.sampled_from([0, 1, 255, 256, 65535, 65536]) | st.integers(0, 70_000),
            st.integers(-1, 1),
        ),
        st.builds(lambda data: Blob(data).encode()[5:], st.binary(max_size=70_000)),
    )
)
@settings(max_examples=300, deadline=None)
def test_a_received_blob_is_checked_in_place_exactly_as_the_decoder_checks_it(body: bytes) -> None:
    """The fetch checks received blobs without building them (`unpack.canonical_blob`): it must accept
    exactly what the bounded decoder accepts, canonical msgpack bin headers and nothing else."""
    raw = b"blob\x00" + body
    assert canonical_blob(raw) == _decodes(raw)


def _plant_tree(remote: Path, leaves: bytes, target: Hash) -> None:
    """A sync commit whose one fan-out tree `ab` holds exactly the bytes `leaves` (written with
    --literally, so git keeps trees it would refuse to make), beside a refs file naming `target`."""
    g = ("--git-dir", str(remote))
    shard = git(*g, "hash-object", "-t", "tree", "--literally", "-w", "--stdin", input=leaves).strip()
    fanout = git(*g, "mktree", input=f"040000 tree {shard}\tab\n".encode()).strip()
    refs = git(*g, "hash-object", "-w", "--stdin", input=f"{target.hex()} refs/heads/main\n".encode()).strip()
    root = git(*g, "mktree", input=f"040000 tree {fanout}\tobjects\n100644 blob {refs}\trefs\n".encode()).strip()
    commit = git(*g, "commit-tree", root, "-m", "planted").strip()
    git(*g, "update-ref", "refs/reel/heads/main", commit)


def _leaf(remote: Path, mode: bytes, name: bytes, content: bytes) -> bytes:
    sha = git("--git-dir", str(remote), "hash-object", "-w", "--stdin", input=content).strip()
    return mode + b" " + name + b"\0" + bytes.fromhex(sha)


def _under_ab(n: int) -> list[Blob]:
    """`n` blobs whose ids begin with `ab` (one fan-out tree holds them all), in id order."""
    out, i = [], 0
    while len(out) < n:
        blob = Blob(b"blob under ab %d" % i)
        if blob.id.hex().startswith("ab"):
            out.append(blob)
        i += 1
    return out


def _fetch_planted(tmp_path: Path, remote: Path) -> tuple[Repo, StorageError]:
    b = Repo.init(tmp_path / "b")
    sync.add_remote(b, "origin", str(remote))
    before = sorted(b.objects)
    with pytest.raises(StorageError) as caught:
        sync.fetch(b, "origin")
    assert caught.value.code == "E007"
    assert sorted(b.objects) == before and b.refs.list("refs/remotes/") == []
    return b, caught.value


@pytest.mark.parametrize("fault", ["none", "upper-case name", "executable", "short name", "wrong content"])
def test_a_fan_out_tree_not_as_a_push_writes_it_is_refused(tmp_path: Path, fault: str) -> None:
    """The leaves of a fan-out tree are checked a shard at a time (`unpack._read_shard`); a shard that is
    not shaped as a reel push writes it must still be refused, naming what is wrong, and store nothing.
    The well-formed shard ("none") passes every check of the objects: the fetch then refuses only
    because the planted trunk names a blob. (A tree with bytes after its last entry git itself will
    not send: `tree_entries` is tested on such bytes below.)"""
    remote = bare(tmp_path / "remote.git")
    blobs = _under_ab(3)
    name = [b.id.hex()[2:].encode() for b in blobs]
    mode = [b"100644"] * 3
    content = [b.encode() for b in blobs]
    if fault == "upper-case name":
        name[1] = name[1].upper()
    elif fault == "executable":
        mode[1] = b"100755"
    elif fault == "short name":
        name[1] = name[1][:-1]
    elif fault == "wrong content":
        content[1] = Blob(b"something else").encode()
    leaves = b"".join(_leaf(remote, m, n, c) for m, n, c in zip(mode, name, content))
    _plant_tree(remote, leaves, blobs[0].id)
    words = {
        "none": "must point at a record, not a blob",
        "upper-case name": "is not a reel object id",
        "executable": "is not a plain blob",
        "short name": "is not a reel object id",
        "wrong content": "does not hash to its name",
    }[fault]
    _, error = _fetch_planted(tmp_path, remote)
    assert words in error.message


_names = st.binary(min_size=1, max_size=12).filter(lambda n: b"\0" not in n)
_entries = st.lists(
    st.tuples(
        st.sampled_from([b"100644", b"40000", b"100755", b"120000", b"160000"]),
        _names,
        st.binary(min_size=20, max_size=20),
    ),
    max_size=8,
)


@settings(max_examples=300, deadline=None)
@given(_entries, st.binary(max_size=3))
def test_a_git_tree_is_read_as_dulwich_reads_it(entries: list[tuple[bytes, bytes, bytes]], tail: bytes) -> None:
    """`unpack.tree_entries` (one regular-expression pass) gives what dulwich's parser gives for every
    tree it accepts, and accepts nothing dulwich refuses (bytes after the last entry included)."""
    from dulwich.objects import parse_tree

    body = b"".join(mode + b" " + name + b"\0" + sha for mode, name, sha in entries) + tail
    try:
        ours = [(int(mode, 8), name, sha) for mode, name, sha in tree_entries(body)]
    except StorageError:
        ours = None
    try:
        theirs = [(mode, name, bytes.fromhex(sha.decode())) for name, mode, sha in parse_tree(body, 20)]
    except Exception:  # dulwich's C and Python parsers raise several types
        theirs = None
    if ours is not None:
        assert ours == theirs
    if not tail:
        assert ours == [(int(m, 8), n, s) for m, n, s in entries]


def test_a_commit_names_its_tree_and_parents_first() -> None:
    tree, p1, p2 = "a" * 40, "b" * 40, "c" * 40
    raw = f"tree {tree}\nparent {p1}\nparent {p2}\nauthor a <a> 1 +0000\ncommitter a <a> 1 +0000\n\nm\n".encode()
    assert commit_links(raw) == (bytes.fromhex(tree), [bytes.fromhex(p1), bytes.fromhex(p2)])
    for bad in (
        raw.replace(b"tree a", b"tree A"),
        b"author a <a> 1 +0000\n" + raw,
        raw.replace(p2.encode(), b"c" * 39),
        b"tree " + b"a" * 41 + b"\n",
    ):
        with pytest.raises(StorageError, match="malformed git object"):
            commit_links(bad)
