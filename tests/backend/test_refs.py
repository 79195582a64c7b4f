"""Refs: compare-and-swap, transactions, reflogs and lock files, on disk, in memory and in Postgres."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reelstore.backend.refdb import ref_format
from reelstore.backend.refdb.refs import ANY, DiskRefStore, MemoryRefStore, ReflogEntry, RefStore
from reelstore.errors import BadInput, Conflict, NotFound, StorageError
from reelstore.objects import Hash
from reelstore.objects.ref import check_ref_name

A, B, C = (Hash(bytes([i]) * 32) for i in (1, 2, 3))


@pytest.fixture(params=["disk", "memory", "postgres"])
def refs(request, tmp_path: Path) -> RefStore:
    if request.param == "memory":
        return MemoryRefStore()
    if request.param == "postgres":
        from reelstore.backend.postgres import PgDb
        from reelstore.backend.postgres_refs import PgRefStore

        return PgRefStore(PgDb(request.getfixturevalue("pg_url")))
    return DiskRefStore(tmp_path, fsync=False)


@pytest.fixture
def disk(tmp_path: Path) -> DiskRefStore:
    return DiskRefStore(tmp_path, fsync=False)


@pytest.mark.parametrize(
    "name",
    [
        "main",
        "heads/main",
        "refs/",
        "refs/heads/",
        "refs/heads/a..b",
        "refs/heads/a//b",
        "refs/heads/a b",
        "refs/heads/a\tb",
        "refs/heads/a\x00b",
        "refs/heads/a\x7fb",
        "refs/heads/-x",
        "refs/heads/.hidden",
        "refs/heads/x.lock",
        "refs/heads/x.lock/y",
        "refs/heads/x.",
        "refs/heads/a~1",
        "refs/heads/a^",
        "refs/heads/a:b",
        "refs/heads/a?",
        "refs/heads/a*",
        "refs/heads/a[",
        "refs/heads/a\\b",
        "refs/heads/a@{1}",
        "refs/" + "x" * 1100,
    ],
)
def test_bad_ref_names_are_e014(refs: RefStore, name: str):
    with pytest.raises(BadInput):
        check_ref_name(name)
    with pytest.raises(BadInput):
        refs.set(name, A)


@pytest.mark.parametrize("name", ["refs/heads/main", "refs/views/a/b-c_d.e", "refs/remotes/o/x@y", "refs/x"])
def test_good_ref_names(name: str):
    assert check_ref_name(name) == name


def test_cas_set(refs: RefStore):
    refs.set("refs/heads/x", A, None)
    assert refs.get("refs/heads/x") == A
    with pytest.raises(Conflict):
        refs.set("refs/heads/x", B, None)
    with pytest.raises(Conflict):
        refs.set("refs/heads/x", B, C)
    assert refs["refs/heads/x"] == A
    refs.set("refs/heads/x", B, A)
    refs.set("refs/heads/x", C)
    assert refs["refs/heads/x"] == C
    with pytest.raises(Conflict):
        refs.set("refs/heads/new", A, B)
    assert refs.get("refs/heads/new") is None
    with pytest.raises(NotFound):
        refs["refs/heads/new"]


def test_delete_by_cas(refs: RefStore):
    refs.set("refs/views/v", A, None)
    with pytest.raises(Conflict):
        refs.delete("refs/views/v", B)
    assert refs["refs/views/v"] == A
    refs.delete("refs/views/v", A)
    assert refs.get("refs/views/v") is None
    assert refs.reflog("refs/views/v") == []
    with pytest.raises(NotFound):
        refs.delete("refs/views/v")


def test_list_by_prefix(refs: RefStore):
    for name, h in (("refs/heads/main", A), ("refs/views/a", B), ("refs/views/b/c", C), ("refs/viewsx", A)):
        refs.set(name, h)
    assert refs.list("refs/views/") == [("refs/views/a", B), ("refs/views/b/c", C)]
    assert [n for n, _ in refs.list()] == ["refs/heads/main", "refs/views/a", "refs/views/b/c", "refs/viewsx"]


def test_transaction_is_all_or_nothing(refs: RefStore):
    refs.set("refs/heads/a", A)
    refs.set("refs/heads/b", B)
    refs.set("refs/heads/c", C)
    tx = refs.transaction("multi")
    tx.update("refs/heads/a", C, A).create("refs/heads/new", C).delete("refs/heads/b", B).verify("refs/heads/z", None)
    tx.verify("refs/heads/c", A)  # wrong: c holds C
    with pytest.raises(BadInput):
        tx.update("refs/heads/a", B)  # same ref twice
    with pytest.raises(Conflict):
        tx.commit()
    assert refs.get("refs/heads/a") == A and refs.get("refs/heads/b") == B and refs.get("refs/heads/new") is None
    assert tx.state == "aborted"
    with refs.transaction("ok") as tx2:
        tx2.update("refs/heads/a", C, A).create("refs/heads/new", C).delete("refs/heads/b", B)
    assert refs.get("refs/heads/a") == C and refs.get("refs/heads/new") == C and refs.get("refs/heads/b") is None
    refs.set("refs/heads/a", A)  # nothing left locked


def test_prepare_holds_locks_until_commit_or_abort(refs: RefStore):
    refs.set("refs/heads/a", A)
    tx = refs.transaction()
    tx.update("refs/heads/a", B, A)
    tx.prepare()
    with pytest.raises(Conflict):
        refs.set("refs/heads/a", C)
    tx.abort()
    assert refs["refs/heads/a"] == A
    refs.set("refs/heads/a", C, A)
    with pytest.raises(BadInput):
        tx.update("refs/heads/b", A)


def test_context_manager_aborts_on_error(refs: RefStore):
    with pytest.raises(RuntimeError):
        with refs.transaction() as tx:
            tx.create("refs/heads/a", A)
            raise RuntimeError("boom")
    assert refs.get("refs/heads/a") is None
    refs.set("refs/heads/a", A, None)


def test_reflog(refs: RefStore):
    refs.set("refs/heads/main", A, None, message="first", principal="alice")
    refs.set("refs/heads/main", B, A, message="second\nline", principal="bob smith")
    log = refs.reflog("refs/heads/main")
    assert [(e.old, e.new, e.principal, e.message) for e in log] == [
        (None, A, "alice", "first"),
        (A, B, "bob smith", "second line" if isinstance(refs, DiskRefStore) else "second\nline"),
    ]
    assert all(e.time_ms > 1_600_000_000_000 for e in log)


def test_reflog_line_round_trip():
    entry = ReflogEntry(None, A, 123, "p q", "msg\twith tab")
    line = entry.line("refs/heads/main")
    assert ReflogEntry.parse(line.rstrip("\n"), "refs/heads/main") == entry
    with pytest.raises(BadInput, match="checksum"):
        ReflogEntry.parse(line.rstrip("\n"), "refs/heads/other")
    with pytest.raises(BadInput):
        ReflogEntry.parse("garbage", "refs/heads/main")


def test_a_ref_or_a_reflog_line_without_its_checksum_is_damage(disk: DiskRefStore, tmp_path: Path):
    """No store ever wrote a ref file or a reflog line without a checksum, so either is E007."""
    (tmp_path / "refs/heads").mkdir(parents=True, exist_ok=True)
    (tmp_path / "refs/heads/main").write_text(A.hex() + "\n")
    with pytest.raises(StorageError, match="is damaged"):
        disk.get("refs/heads/main")
    (tmp_path / "refs/heads/main").unlink()
    (tmp_path / "logs/refs/heads").mkdir(parents=True)
    (tmp_path / "logs/refs/heads/main").write_text(f"{'0' * 64} {A.hex()} 5 alice\tcommit v\n")
    with pytest.raises(StorageError, match="damaged at line 1: malformed reflog line"):
        disk.reflog("refs/heads/main")


def test_a_packed_refs_file_is_not_read(disk: DiskRefStore, tmp_path: Path):
    """Refs are files of their own only: a `packed-refs` file (no command writes one) names no ref and
    is in no ref's way."""
    disk.set("refs/heads/main", A)
    line = f"{B.hex()} refs/views/v {ref_format.checksum('refs/views/v', B.hex())}"
    (tmp_path / "packed-refs").write_text(f"# reel packed-refs v2\n{line}\n")
    fresh = DiskRefStore(tmp_path, fsync=False)
    assert fresh.get("refs/views/v") is None
    assert fresh.list() == [("refs/heads/main", A)]
    fresh.set("refs/views/v/w", C, None)
    assert fresh.list() == [("refs/heads/main", A), ("refs/views/v/w", C)]


@pytest.mark.parametrize("where", ["loose", "reflog"])
def test_every_single_byte_change_of_a_ref_file_is_e007(disk: DiskRefStore, tmp_path: Path, where: str):
    """Each byte of each file, replaced by each of a few values: read gives the same answer or E007."""
    disk.set("refs/heads/main", A, message="commit v")
    disk.set("refs/drains/main", B)
    disk.set("refs/heads/main", C, A, message="commit w")
    path = {"loose": tmp_path / "refs/heads/main", "reflog": tmp_path / "logs/refs/heads/main"}[where]
    good = path.read_bytes()
    want = (DiskRefStore(tmp_path).list(), DiskRefStore(tmp_path).reflog("refs/heads/main"))
    for i in range(len(good)):
        for x in (0x01, 0x20, 0x80):
            path.write_bytes(good[:i] + bytes([good[i] ^ x]) + good[i + 1 :])
            fresh = DiskRefStore(tmp_path)
            try:
                got = (fresh.list(), fresh.reflog("refs/heads/main"))
            except StorageError:
                continue
            assert got == want, (i, x)
    path.write_bytes(good)


def test_directory_file_conflicts_are_refused(refs: RefStore):
    refs.set("refs/heads/a", A)
    with pytest.raises(Conflict):
        refs.set("refs/heads/a/b", B)
    refs.set("refs/views/x/y", A)
    with pytest.raises(Conflict):
        refs.set("refs/views/x", B)
    assert refs.get("refs/heads/a") == A and refs.get("refs/heads/a/b") is None
    assert refs.get("refs/views/x") is None and refs.get("refs/views/x/y") == A


def test_stale_lock_is_a_clear_e002_and_never_broken(disk: DiskRefStore, tmp_path: Path):
    disk.set("refs/heads/main", A)
    lock = tmp_path / "refs/heads/main.lock"
    lock.write_text(B.hex() + "\n")
    with pytest.raises(Conflict, match="lock"):
        disk.set("refs/heads/main", C, A)
    with pytest.raises(Conflict, match="lock"):
        disk.delete("refs/heads/main", A)
    assert disk["refs/heads/main"] == A
    assert lock.read_text() == B.hex() + "\n"
    assert [n for n, _ in disk.list()] == ["refs/heads/main"]
    lock.unlink()
    disk.set("refs/heads/main", C, A)


def test_failed_transaction_releases_only_its_own_locks(disk: DiskRefStore, tmp_path: Path):
    disk.set("refs/heads/a", A)
    disk.set("refs/heads/b", B)
    (tmp_path / "refs/heads/b.lock").write_bytes(b"")
    tx = disk.transaction().update("refs/heads/a", C, A).update("refs/heads/b", C, B)
    with pytest.raises(Conflict):
        tx.commit()
    assert not (tmp_path / "refs/heads/a.lock").exists()
    assert (tmp_path / "refs/heads/b.lock").exists()
    assert disk["refs/heads/a"] == A


def test_damaged_refs_are_e007(disk: DiskRefStore, tmp_path: Path):
    disk.set("refs/heads/main", A)
    (tmp_path / "refs/heads/main").write_text("not a hash\n")
    with pytest.raises(StorageError):
        disk.get("refs/heads/main")


def test_deleting_a_ref_prunes_empty_directories(disk: DiskRefStore, tmp_path: Path):
    disk.set("refs/views/deep/er/v", A)
    disk.delete("refs/views/deep/er/v", A)
    assert not (tmp_path / "refs/views/deep").exists()
    assert not (tmp_path / "logs/refs/views/deep").exists()
    disk.set("refs/views/deep", B, None)
    assert disk["refs/views/deep"] == B


def test_any_expected_value(refs: RefStore):
    refs.set("refs/heads/x", A, ANY)
    refs.set("refs/heads/x", B, ANY)
    assert refs["refs/heads/x"] == B


def test_stray_files_under_refs_are_not_refs(disk: DiskRefStore, tmp_path: Path):
    disk.set("refs/heads/main", A)
    (tmp_path / "refs/heads/.DS_Store").write_bytes(b"junk")
    (tmp_path / "refs/heads/main.lock").write_bytes(b"")
    (tmp_path / "refs/heads/has space").write_text(B.hex())
    assert disk.list() == [("refs/heads/main", A)]


def test_one_transaction_cannot_create_a_ref_and_its_directory(refs: RefStore):
    tx = refs.transaction().create("refs/views/p", A).create("refs/views/p/q", B)
    with pytest.raises(Conflict):
        tx.commit()
    assert refs.list() == []


def test_damaged_reflog_is_e007(disk: DiskRefStore, tmp_path: Path):
    disk.set("refs/heads/main", A, message="m\u2028still one line")
    assert disk.reflog("refs/heads/main")[0].message == "m\u2028still one line"
    disk.set("refs/heads/main", B, principal="tab\tand\nnewline")
    assert disk.reflog("refs/heads/main")[1].principal == "tab and newline"
    with open(tmp_path / "logs/refs/heads/main", "a") as f:
        f.write("torn line\n")
    with pytest.raises(StorageError):
        disk.reflog("refs/heads/main")


def test_non_ascii_names_survive_a_fresh_read(disk: DiskRefStore):
    disk.set("refs/views/café\u00a0au-lait", A)
    assert DiskRefStore(disk.root).list() == [("refs/views/café\u00a0au-lait", A)]
    disk.set("refs/views/café\u00a0au-lait", B, A)
    assert disk["refs/views/café\u00a0au-lait"] == B


NAMES = ["refs/heads/a", "refs/heads/a/b", "refs/views/x", "refs/views/x/y/z", "refs/views/y"]
VALUES = [None, A, B, C]
ops = st.lists(
    st.tuples(
        st.sampled_from(["set", "delete", "tx"]),
        st.lists(
            st.tuples(st.sampled_from(NAMES), st.sampled_from(VALUES[1:]), st.sampled_from([*VALUES, ANY])),
            min_size=1,
            max_size=3,
        ),
    ),
    max_size=12,
)


def _apply(store: RefStore, kind: str, items: list) -> str:
    """Run one scripted step; the error code it raised, or "ok"."""
    try:
        if kind == "set":
            name, new, old = items[0]
            store.set(name, new, old)
        elif kind == "delete":
            name, _, old = items[0]
            store.delete(name, old if old is not None else ANY)
        else:
            tx = store.transaction()
            for name, new, old in items:
                if name not in tx.updates:
                    tx.update(name, new, old)
            tx.commit()
    except (Conflict, NotFound, BadInput) as exc:
        return exc.code
    return "ok"


@settings(max_examples=60, deadline=None)
@given(ops)
def test_disk_and_memory_stores_agree(tmp_path_factory, script):
    disk = DiskRefStore(tmp_path_factory.mktemp("refs"), fsync=False)
    mem = MemoryRefStore()
    for kind, items in script:
        results = [_apply(store, kind, items) for store in (disk, mem)]
        assert results[0] == results[1], (kind, items, results)
        assert disk.list() == mem.list()
    for name, _ in disk.list():
        assert len(disk.reflog(name)) == len(mem.reflog(name))


# The patterns the set checks replaced: the oracle they must agree with.
_BAD_RE = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]")
_LOOSE_RE = re.compile(rb"([0-9a-f]{64}) ([0-9a-f]{8})\n")


@settings(max_examples=2000)
@given(st.text(alphabet="\x00\x1f \x7f~^:?*[]\\\t\n/.-@{}aZ9é\u2003", max_size=12))
def test_ref_name_characters_are_refused_as_the_pattern_says(tail: str):
    name = "refs/heads/x" + tail
    try:
        check_ref_name(name)
        accepted = True
    except BadInput as err:
        accepted = False
        bad_chars = "control character" in err.message
    if _BAD_RE.search(name) or "@{" in name:
        assert not accepted and bad_chars
    elif accepted is False:
        assert not bad_chars


def _loose_by_pattern(name: str, data: bytes) -> Hash | None:
    m = _LOOSE_RE.fullmatch(data)
    if m is None or ref_format.checksum(name, m.group(1).decode()) != m.group(2).decode():
        return None
    return Hash.from_hex(m.group(1).decode())


@settings(max_examples=2000)
@given(st.integers(0, 74), st.sampled_from(b"0aAf g\n\x00\xff"), st.booleans())
def test_loose_ref_form_is_checked_as_the_pattern_says(at: int, byte: int, cut: bool):
    good = ref_format.format_loose("refs/heads/m", A)
    data = good[:at] if cut else good[:at] + bytes([byte]) + good[at + 1 :]
    want = _loose_by_pattern("refs/heads/m", data)
    try:
        got: Hash | None = ref_format.parse_loose("refs/heads/m", data)
    except StorageError:
        got = None
    assert got == want


def test_a_writer_appends_the_line_the_reader_parses():
    """Ref writers format their reflog line in ref_format (without the reader's entry class)."""
    for old, new, who, msg in ((None, A, "p  q", "m\nx"), (A, B, "", "tab\there"), (B, None, " a\tb ", "")):
        line = ref_format.reflog_line("refs/heads/m", old, new, 123, who, msg)
        assert line == ReflogEntry(old, new, 123, who, msg).line("refs/heads/m")
        back = ReflogEntry.parse(line.rstrip("\n"), "refs/heads/m")
        assert (back.old, back.new, back.time_ms, back.principal) == (old, new, 123, " ".join(who.split()))
