"""Every kind: exact round trips, order-independent ids, and damaged bytes that never pass as valid."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reelstore.codec import frame, pack_body
from reelstore.errors import BadInput
from reelstore.objects import (
    KINDS,
    Approval,
    Blob,
    Capability,
    Chunks,
    Delta,
    Effect,
    Effects,
    Finding,
    Hash,
    Journal,
    OpEvent,
    Record,
    Recording,
    Tree,
    View,
    decode,
    decode_verified,
)
from reelstore.objects.approval import VERDICTS, VIA
from reelstore.objects.capability import OPS
from reelstore.objects.chunks import CHUNK_MAX, THRESHOLD
from reelstore.objects.effect import DELIVERIES
from reelstore.objects.journal import OUTCOMES, STATES
from reelstore.objects.opevent import ACTIONS

hashes = st.binary(min_size=32, max_size=32).map(Hash)
opt_hashes = st.none() | hashes
names = st.text(min_size=1, max_size=12)
texts = st.text(max_size=16)
ints = st.integers(min_value=0, max_value=2**63 - 1)
leaf = st.none() | st.booleans() | st.integers(-1000, 1000) | texts | st.binary(max_size=8)
maps = st.dictionaries(
    st.text(max_size=6), st.recursive(leaf, lambda i: st.lists(i, max_size=3), max_leaves=5), max_size=4
)


def _sorted_unique(pairs):
    seen = {}
    for name, rest in pairs:
        seen.setdefault(name, rest)
    return sorted(seen.items())


trees = st.builds(
    lambda level, entries: Tree(level, tuple(_sorted_unique(entries))),
    st.just(0),
    st.lists(st.tuples(names, hashes), max_size=5),
) | st.builds(
    lambda level, entries: Tree(level, tuple(_sorted_unique(entries))),
    st.integers(1, 64),
    st.lists(st.tuples(names, hashes), min_size=1, max_size=5),
)
deltas = st.builds(
    lambda base, ops: Delta(base, tuple(("put", n, h) if h else ("remove", n) for n, h in _sorted_unique(ops))),
    opt_hashes,
    st.lists(st.tuples(names, opt_hashes), max_size=5),
)
capabilities = st.builds(
    Capability.make, st.sets(st.sampled_from(OPS), min_size=1), texts, st.none() | ints, st.none() | ints
)
effects = st.builds(
    Effect,
    st.text(min_size=1, max_size=8),
    st.sampled_from(("B", "C")),
    names,
    maps,
    st.sampled_from(DELIVERIES),
    st.none() | maps,
    texts,
    maps,
)
views = st.builds(
    View,
    names,
    opt_hashes,
    hashes,
    opt_hashes,
    st.lists(hashes, max_size=3).map(tuple),
    opt_hashes,
    st.sampled_from(("isolated", "autonomous")),
    st.integers(1, 64),
    maps,
    opt_hashes,
    st.lists(hashes, max_size=3).map(tuple),
)
records = st.builds(Record, opt_hashes, hashes, opt_hashes, opt_hashes, texts, texts, ints)
journals = st.builds(
    Journal,
    opt_hashes,
    names,
    hashes,
    ints,
    hashes,
    names,
    st.sampled_from(STATES),
    ints,
    ints,
    st.none() | maps,
    texts,
    opt_hashes,
)
findings = st.builds(Finding, names, hashes, st.sampled_from(OUTCOMES), names, names, ints)
op_events = st.builds(OpEvent, names, st.sampled_from(ACTIONS), names, ints, texts, ints, texts, texts, opt_hashes)
chunk_lists = (
    st.lists(st.tuples(hashes, st.integers(1, CHUNK_MAX)), min_size=2, max_size=5)
    .filter(lambda parts: sum(n for _, n in parts) > THRESHOLD)
    .map(lambda parts: Chunks(sum(n for _, n in parts), tuple(parts)))
)
exchanges = st.fixed_dictionaries(
    {
        "fp": names,
        "method": st.sampled_from(("GET", "HEAD")),
        "url": names,
        "status": st.integers(100, 999),
        "headers": st.dictionaries(names, texts, max_size=3),
        "body": hashes,
    }
)
recordings = st.builds(Recording, st.lists(exchanges, max_size=3).map(tuple), ints, texts)
approvals = st.builds(
    Approval,
    st.sampled_from(VERDICTS),
    names,
    names,
    opt_hashes,
    hashes,
    names,
    names,
    st.sampled_from(VIA),
    ints,
    texts,
)
objects = st.one_of(
    st.builds(Blob, st.binary(max_size=64)),
    trees,
    deltas,
    capabilities,
    effects,
    st.builds(Effects, st.lists(hashes, max_size=4).map(tuple)),
    views,
    records,
    journals,
    findings,
    op_events,
    chunk_lists,
    recordings,
    approvals,
)


def test_every_kind_has_a_strategy():
    assert set(KINDS) == {
        "blob",
        "tree",
        "delta",
        "capability",
        "effect",
        "effects",
        "view",
        "record",
        "journal",
        "finding",
        "opevent",
        "chunks",
        "recording",
        "approval",
    }


@settings(max_examples=150, deadline=None)
@given(objects)
def test_decode_encode_round_trip(obj):
    raw = obj.encode()
    back = decode(raw)
    assert type(back) is type(obj)
    assert back == obj
    assert back.encode() == raw
    assert back.id == obj.id == Hash.of(raw)
    assert decode_verified(raw, obj.id) == obj
    for ref in obj.references():
        assert isinstance(ref, Hash)


@settings(max_examples=100, deadline=None)
@given(maps, st.randoms())
def test_ids_do_not_depend_on_dict_insertion_order(meta, rnd):
    keys = list(meta)
    rnd.shuffle(keys)
    shuffled = {k: meta[k] for k in keys}
    h = Hash(b"\x01" * 32)
    a = View("refs/heads/main", h, h, meta=meta)
    b = View("refs/heads/main", h, h, meta=shuffled)
    assert a.id == b.id
    ea = Effect("http", "C", "r", meta, meta=meta)
    eb = Effect("http", "C", "r", shuffled, meta=shuffled)
    assert ea.encode() == eb.encode()


@settings(max_examples=150, deadline=None)
@given(objects, st.data())
def test_flipped_byte_never_passes_as_the_same_object(obj, data):
    raw = bytearray(obj.encode())
    i = data.draw(st.integers(0, len(raw) - 1))
    raw[i] ^= data.draw(st.integers(1, 255))
    damaged = bytes(raw)
    with pytest.raises(BadInput):
        decode_verified(damaged, obj.id)
    try:
        other = decode(damaged)
    except BadInput:
        return
    assert other.id != obj.id
    assert other.encode() == damaged


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=80))
def test_random_bytes_decode_or_raise_e014_only(raw):
    try:
        obj = decode(raw)
    except BadInput:
        return
    assert obj.encode() == raw


@pytest.mark.parametrize("raw", [b"blob\x00\xc4", b"blob\x00\xc5\x00", b"blob\x00\xc6\x00\x00\x00"])
def test_a_blob_cut_inside_its_bin_header_is_e014(raw: bytes) -> None:
    """The length the header cannot hold must not reach the header builder (it raised OverflowError)."""
    from reelstore.objects.block import blob_content

    with pytest.raises(BadInput, match="E014"):
        decode(raw)
    with pytest.raises(BadInput):
        blob_content(raw, 5)


def test_unknown_kind_and_trailing_bytes_are_e014():
    with pytest.raises(BadInput, match="unknown object kind"):
        decode(frame("gadget", pack_body({})))
    good = Blob(b"x").encode()
    with pytest.raises(BadInput):
        decode(good + b"\x00")
    with pytest.raises(BadInput):
        decode(good[:-1])


@pytest.mark.parametrize(
    "body",
    [
        {"entries": [], "level": 0, "extra": 1},
        {"entries": [["b", b"\x00" * 32], ["a", b"\x00" * 32]], "level": 0},
        {"entries": [["a", b"\x00" * 31]], "level": 0},
        {"entries": [], "level": 1},
        {"entries": [], "level": -1},
        {"entries": [["", b"\x00" * 32]], "level": 0},
    ],
)
def test_invalid_tree_bodies_are_e014(body):
    with pytest.raises(BadInput):
        decode(frame("tree", pack_body(body)))


def test_invalid_field_values_are_e014():
    h = Hash(b"\x02" * 32)
    with pytest.raises(BadInput):
        Capability(("write", "read"), "")
    with pytest.raises(BadInput):
        Capability.make(["launch"], "")
    with pytest.raises(BadInput):
        View("refs/heads/main", h, h, depth=65)
    with pytest.raises(BadInput):
        Effect("http", "A", "r", {})
    with pytest.raises(BadInput):
        Journal(None, "main", h, 0, h, "op", "maybe", 0, 0)
    with pytest.raises(BadInput):
        Record(None, h, time=-1)
    with pytest.raises(BadInput, match=r"op\.amount"):
        Effect("http", "C", "r", {"amount": float("nan")})


def test_references_list_every_edge():
    a, b, c, d = (Hash(bytes([i]) * 32) for i in range(1, 5))
    assert set(Record(a, b, c, d).references()) == {a, b, c, d}
    assert set(Delta(a, (("put", "x", b), ("remove", "y"))).references()) == {a, b}
    assert set(View("refs/heads/main", a, b, c, (d,), None).references()) == {a, b, c, d}
    assert Effects((a, b)).references() == (a, b)
    assert set(Journal(a, "main", b, 0, c, "op", "unknown", 1, 0, finding=d).references()) == {a, b, c, d}
    assert Tree(0, (("k", a),)).references() == (a,)


def test_blob_content_and_id_are_stable():
    blob = Blob(b"hi\n")
    assert blob.content() == b"hi\n"
    assert blob.encode() == b"blob\x00\xc4\x03hi\n"
    assert blob.id.hex() == Hash.of(b"blob\x00\xc4\x03hi\n").hex()


def test_non_canonical_bodies_of_valid_objects_are_e014():
    tree = Tree(0, ())
    unsorted = b"tree\x00\x82\xa5level\x00\xa7entries\x90"
    long_int = b"tree\x00\x82\xa7entries\x90\xa5level\xcd\x00\x00"
    assert tree.encode() == b"tree\x00\x82\xa7entries\x90\xa5level\x00"
    for raw in (unsorted, long_int, b"blob\x00\xd9\x01x", b"blob\x00\xc5\x00\x01x"):
        with pytest.raises(BadInput):
            decode(raw)


def test_blob_content_gives_what_a_full_decode_gives() -> None:
    from reelstore.objects import Blob
    from reelstore.objects.block import blob_content

    for blob in (Blob(b""), Blob(b"x" * 300), Blob(b"y" * 70000)):
        assert bytes(blob_content(blob.encode(), len(b"blob\0"))) == blob.data


def test_blob_content_refuses_a_blob_whose_length_lies() -> None:
    from reelstore.objects.block import blob_content

    for raw in (b"blob\x00\xc4\x05abc", b"blob\x00", b"blob\x00\xd9\x01x"):
        with pytest.raises(BadInput):
            blob_content(raw, 5)


def test_every_kind_has_a_pack_code():
    from reelstore.backend.packs.pack import KIND_CODES

    assert set(KIND_CODES) == set(KINDS) and len(set(KIND_CODES.values())) == len(KIND_CODES)


def test_each_kind_lives_where_the_lazy_package_looks() -> None:
    from reelstore.objects import KIND_HOMES, KINDS

    assert set(KINDS) == set(KIND_HOMES)
    assert all(cls.__module__ == f"reelstore.objects.{KIND_HOMES[kind]}" for kind, cls in KINDS.items())


def test_decode_loads_the_module_of_the_kind_it_meets() -> None:
    """In a fresh process only what is asked for is loaded; decoding a record loads its kind's module."""
    import json
    import subprocess
    import sys

    from reelstore.objects import Record, Tree

    raw = Record(None, Tree(0, ()).id, message="lazy").encode()
    code = "\n".join(
        [
            "import json, sys",
            "import reelstore.objects as o",
            "kinds = lambda: sorted(m for m in sys.modules if m.startswith('reelstore.objects.'))",
            "before = kinds()",
            "obj = o.decode(bytes.fromhex(sys.argv[1]))",
            "print(json.dumps([type(obj).__name__, obj.message, before, kinds()]))",
        ]
    )
    done = subprocess.run(
        [sys.executable, "-c", code, raw.hex()], capture_output=True, text=True, timeout=60, check=True
    )
    name, message, before, after = json.loads(done.stdout)
    assert (name, message) == ("Record", "lazy")
    assert before == []
    assert "reelstore.objects.record" in after and "reelstore.objects.view" not in after


def test_a_view_lists_its_approvals_and_a_body_lacking_any_key_is_e014() -> None:
    h = Hash.of(b"x")
    plain = View("refs/heads/main", h, h)
    assert b"approvals" in plain.encode() and b"recording" in plain.encode()
    body = dict(plain.body())
    del body["approvals"]
    with pytest.raises(BadInput, match="lacks"):
        View.from_body(body)
    approved = View("refs/heads/main", h, h, approvals=(h,))
    assert b"approvals" in approved.encode() and decode(approved.encode()) == approved
    assert h in approved.references()
