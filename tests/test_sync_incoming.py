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
from reelstore.objects import Blob, Hash, Record
from reelstore.storage.repo import Repo
from reelstore.sync import incoming
from reelstore.sync.unpack import canonical_blob, unpack


def _similar(repo: Repo, n: int) -> Hash:
    """`n` blobs that differ in a few bytes each: git deltifies them against each other."""
    from reelstore.namespace.tree import Namespace

    blobs = [Blob(b"".join(b"line %d of a long file that barely changes\n" % j for j in range(200)) + b"%d" % i)
             for i in range(n)]
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


@given(st.one_of(
    st.binary(max_size=40),
    st.builds(_bin, st.sampled_from([0xC4, 0xC5, 0xC6, 0xC7, 0x00]),
              st.sampled_from([0, 1, 255, 256, 65535, 65536]) | st.integers(0, 70_000), st.integers(-1, 1)),
    st.builds(lambda data: Blob(data).encode()[5:], st.binary(max_size=70_000))))
@settings(max_examples=300, deadline=None)
def test_a_received_blob_is_checked_in_place_exactly_as_the_decoder_checks_it(body: bytes) -> None:
    """The fetch checks received blobs without building them (`unpack.canonical_blob`): it must accept
    exactly what the bounded decoder accepts, canonical msgpack bin headers and nothing else."""
    raw = b"blob\x00" + body
    assert canonical_blob(raw) == _decodes(raw)
