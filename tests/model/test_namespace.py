"""The namespace map against a plain dict: history independence, reads, diff, write cost, damage."""

from __future__ import annotations

import random

import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reelstore.backend.object_store import MemoryObjectStore
from reelstore.codec import frame, pack_body
from reelstore.errors import BadInput, NotFound, StorageError
from reelstore.namespace.node import MAX_ENTRIES, TARGET_FANOUT, is_boundary, parse_node
from reelstore.namespace.tree import Namespace
from reelstore.objects import Blob, Hash, Tree, decode

VALUES = [Blob(f"v{i}".encode()).id for i in range(8)]
NAMES = st.text(alphabet="abcd/:é", min_size=1, max_size=6) | st.integers(0, 2999).map(lambda i: f"n/{i:04d}")
OPS = st.lists(st.tuples(NAMES, st.none() | st.sampled_from(VALUES)), max_size=150)
BASES = st.tuples(st.integers(0, 2500), st.integers(0, 1000)).map(lambda p: base_map(*p))
SETTINGS = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def base_map(size: int, seed: int) -> list[tuple[str, Hash]]:
    """A starting map of up to a few thousand names drawn from the same space as NAMES, so ops hit it."""
    rng = random.Random(seed)
    return [(f"n/{i:04d}", rng.choice(VALUES)) for i in sorted(rng.sample(range(3000), size))]


def apply(ref: dict, changes: dict) -> dict:
    out = dict(ref)
    for name, value in changes.items():
        if value is None:
            out.pop(name, None)
        else:
            out[name] = value
    return out


def build(ns: Namespace, ops: list, batch: int) -> tuple[Hash, dict]:
    """Apply `ops` in batches of `batch` (later ops in a batch win, as in a dict)."""
    root, ref = ns.empty(), {}
    for start in range(0, len(ops), batch):
        changes = dict(ops[start : start + batch])
        root = ns.update(root, changes)
        ref = apply(ref, changes)
    return root, ref


def leaves(store, root: Hash) -> list[Tree]:
    node = store.get(root)
    return [node] if node.level == 0 else [leaf for _, h in node.entries for leaf in leaves(store, h)]


def big_map(n: int, seed: int = 0) -> dict[str, Hash]:
    rng = random.Random(seed)
    return {f"dir{rng.randrange(50)}/file-{i:06d}": rng.choice(VALUES) for i in range(n)}


@SETTINGS
@given(BASES, OPS, st.integers(1, 40), st.randoms(use_true_random=False))
def test_random_operations_match_a_dict_and_the_root_is_history_independent(base, ops, batch, rnd):
    ns = Namespace(MemoryObjectStore())
    start = ns.update(ns.empty(), dict(base))
    root, ref = start, dict(base)
    for i in range(0, len(ops), batch):
        changes = dict(ops[i : i + batch])
        root, ref = ns.update(root, changes), apply(ref, changes)
    assert list(ns.items(root)) == sorted(ref.items())
    assert ns.count(root) == len(ref) == ns.verify(root)
    for name, _ in ops:
        assert ns.get(root, name) == ref.get(name)
    assert ns.update(ns.empty(), ref) == root
    shuffled = list(ref.items())
    rnd.shuffle(shuffled)
    other, _ = build(ns, shuffled, 1 + len(shuffled) // 25)
    assert other == root
    one_by_one = start
    for name, value in ops:
        one_by_one = ns.update(one_by_one, {name: value})
    assert one_by_one == root


@SETTINGS
@given(BASES, OPS, OPS)
def test_diff_equals_the_dict_difference(base, ops_a, ops_b):
    ns = Namespace(MemoryObjectStore())
    start = ns.update(ns.empty(), dict(base))
    ref_a, ref_b = apply(dict(base), dict(ops_a)), apply(dict(base), dict(ops_b))
    a, b = ns.update(start, dict(ops_a)), ns.update(start, dict(ops_b))
    want = [(k, ref_a.get(k), ref_b.get(k)) for k in sorted(set(ref_a) | set(ref_b)) if ref_a.get(k) != ref_b.get(k)]
    assert list(ns.diff(a, b)) == want
    assert list(ns.diff(b, a)) == [(k, y, x) for k, x, y in want]
    assert list(ns.diff(a, a)) == []
    assert (ns.count(a), ns.count(start), ns.count(b)) == (len(ref_a), len(base), len(ref_b))


@SETTINGS
@given(
    st.lists(st.tuples(NAMES, st.none() | st.sampled_from(VALUES)), max_size=60),
    st.sampled_from(["", "a", "ab", "é/", "d:"]),
)
def test_prefix_items_are_the_matching_names_in_order(ops, prefix):
    ns = Namespace(MemoryObjectStore())
    root, ref = build(ns, ops, 7)
    assert list(ns.items(root, prefix)) == sorted((k, v) for k, v in ref.items() if k.startswith(prefix))


def test_large_map_reads_diff_and_removal_to_empty():
    ns = Namespace(MemoryObjectStore())
    ref = big_map(20_000)
    root = ns.update(ns.empty(), ref)
    top = ns.objects.get(root)
    assert isinstance(top, Tree) and top.level >= 2
    assert ns.verify(root) == ns.count(root) == 20_000
    cold = Namespace(ns.objects)
    assert all(type(v) is Hash for _, v in cold.items(root, "dir1"))
    assert type(cold.get(root, next(iter(ref)))) is Hash
    assert list(ns.items(root, "dir7/")) == sorted((k, v) for k, v in ref.items() if k.startswith("dir7/"))
    rng = random.Random(5)
    picked = rng.sample(sorted(ref), 40)
    changes = {name: None if i % 2 else VALUES[(i + 1) % len(VALUES)] for i, name in enumerate(picked)}
    changes["dir3/new"] = VALUES[0]
    after = ns.update(root, changes)
    want = apply(ref, changes)
    assert ns.update(ns.empty(), want) == after
    expect = sorted((k, ref.get(k), want.get(k)) for k in changes if ref.get(k) != want.get(k))
    assert list(ns.diff(root, after)) == expect
    assert all(type(v) is Hash for _, x, y in Namespace(ns.objects).diff(root, after) for v in (x, y) if v is not None)
    assert ns.update(after, {name: None for name in want}) == Namespace.empty()


def test_point_update_writes_a_logarithmic_number_of_nodes():
    store = MemoryObjectStore()
    ns = Namespace(store)
    ref = big_map(30_000, seed=3)
    root = ns.update(ns.empty(), ref)
    rng = random.Random(9)
    names = sorted(ref)
    for i in range(60):
        before = set(store)
        kind = i % 3
        if kind == 0:
            change = {rng.choice(names): Blob(f"new{i}".encode()).id}
        elif kind == 1:
            change = {rng.choice(names): None}
        else:
            change = {f"{rng.choice(names)}~{i}": VALUES[0]}
        root = ns.update(root, change)
        written = set(store) - before
        depth = ns.objects.get(root).level
        assert all(isinstance(store.get(h), Tree) for h in written)
        assert 1 <= len(written) <= 4 * (depth + 1)
    assert ns.verify(root) == ns.count(root)


def test_nodes_follow_the_boundary_rule_and_target_fanout():
    names = [f"k{i}" for i in range(20_000)]
    share = sum(is_boundary(n, 0) for n in names) / len(names)
    assert 1 / (1.5 * TARGET_FANOUT) < share < 1.5 / TARGET_FANOUT
    assert [is_boundary(n, 0) for n in names[:200]] != [is_boundary(n, 1) for n in names[:200]]


def test_forced_cut_keeps_nodes_bounded_and_history_independent():
    names = [n for n in (f"x{i:05d}" for i in range(40_000)) if not is_boundary(n, 0)][: 2 * MAX_ENTRIES + 40]
    ns = Namespace(MemoryObjectStore())
    ref = {n: VALUES[0] for n in names}
    root = ns.update(ns.empty(), ref)
    assert [len(leaf.entries) for leaf in leaves(ns.objects, root)] == [MAX_ENTRIES, MAX_ENTRIES, 40]
    rng = random.Random(2)
    order = list(ref)
    rng.shuffle(order)
    root2 = ns.empty()
    for start in range(0, len(order), 97):
        root2 = ns.update(root2, {n: ref[n] for n in order[start : start + 97]})
    assert root2 == root
    shifted = ns.update(root, {"x": VALUES[1]})
    assert ns.update(ns.empty(), {**ref, "x": VALUES[1]}) == shifted
    assert ns.verify(shifted) == len(ref) + 1


def test_empty_map_is_the_init_tree_and_is_written_when_reached():
    store = MemoryObjectStore()
    ns = Namespace(store)
    assert Namespace.empty() == Tree(0, ()).id
    assert ns.count(ns.empty()) == 0 and list(ns.items(ns.empty())) == []
    assert ns.get(ns.empty(), "a") is None
    root = ns.update(ns.empty(), {"a": VALUES[0]})
    assert ns.update(root, {"b": None}) == root
    assert ns.update(root, {"a": VALUES[0]}) == root
    assert ns.update(root, {}) == root
    assert ns.update(root, {"a": None}) == ns.empty()
    assert store.has(ns.empty())


@pytest.mark.parametrize("fixture", ["repo", "mem"])
def test_on_the_repository_stores(fixture, request):
    store = request.getfixturevalue(fixture).objects
    ns = Namespace(store)
    ref = big_map(600, seed=1)
    items = list(ref.items())
    root = ns.update(ns.empty(), dict(items[:300]))
    root = ns.update(root, dict(items[300:]))
    fresh = Namespace(store)
    assert list(fresh.items(root)) == sorted(ref.items())
    assert fresh.verify(root) == 600
    assert fresh.update(fresh.empty(), ref) == root


def test_bad_input_is_refused():
    ns = Namespace(MemoryObjectStore())
    for bad in ({"": VALUES[0]}, {"a" * 4097: VALUES[0]}, {"a": b"short"}, {"\ud800": VALUES[0]}, {3: VALUES[0]}):
        with pytest.raises(BadInput):
            ns.update(ns.empty(), bad)
    with pytest.raises(BadInput):
        ns.get(ns.objects.put(Blob(b"x")), "a")
    with pytest.raises(NotFound):
        ns.get(Hash(bytes(32)), "a")


def _plant(repo, raw: bytes) -> Hash:
    """Put bytes under their hash without the codec's check: what a damaged or hostile store holds."""
    h = Hash.of(raw)
    if repo.path is None:
        repo.objects._objects[h] = raw
    else:
        path = repo.path / "objects" / h.hex()[:2] / h.hex()[2:]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(zstandard.ZstdCompressor().compress(raw))
    return h


@pytest.mark.parametrize("fixture", ["repo", "mem"])
def test_damaged_trees_are_storage_errors(fixture, request):
    repo = request.getfixturevalue(fixture)
    store = repo.objects
    root = Namespace(store).update(Namespace.empty(), big_map(3000, seed=4))
    top = store.get(root)
    name0, child0 = top.entries[0]
    damaged = [
        store.put(Blob(b"not a tree")),
        _plant(repo, frame("tree", pack_body({"level": 0, "entries": [["b", VALUES[0]], ["a", VALUES[0]]]}))),
        store.put(Tree(top.level, ((name0, child0),))),
        store.put(Tree(top.level - 1, (("aaa", VALUES[0]),))),
        Hash(bytes(32)),
    ]
    for bad_child in damaged:
        bad_root = store.put(Tree(top.level, ((name0, bad_child), *top.entries[1:])))
        probes = (
            lambda ns, r: list(ns.items(r)),
            lambda ns, r: ns.get(r, name0),
            lambda ns, r: ns.count(r),
            lambda ns, r: ns.verify(r),
            lambda ns, r: list(ns.diff(root, r)),
            lambda ns, r: ns.update(r, {name0: None}),
        )
        for probe in probes:
            with pytest.raises(StorageError) as err:
                probe(Namespace(store), bad_root)
            assert err.value.code == "E007"


def test_overlapping_children_and_miscut_nodes_are_storage_errors(mem):
    store = mem.objects
    left = store.put(Tree(0, (("a", VALUES[0]), ("c", VALUES[0]))))
    right = store.put(Tree(0, (("b", VALUES[0]),)))
    overlapping = store.put(Tree(1, (("a", left), ("b", right))))
    with pytest.raises(StorageError):
        list(Namespace(store).items(overlapping))
    with pytest.raises(StorageError):
        Namespace(store).verify(overlapping)
    miscut = store.put(Tree(0, tuple(sorted(big_map(300).items()))))
    assert list(Namespace(store).items(miscut))
    with pytest.raises(StorageError):
        Namespace(store).verify(miscut)


def valid_doc(level: int, names: list[str]) -> dict:
    return {"entries": [[n, VALUES[i % 8]] for i, n in enumerate(sorted(set(names)))], "level": level}


def mutate(doc: dict, how: int, at: int) -> object:
    """One of the ways a tree body can be wrong (or, for how == 0, no change at all)."""
    entries = doc["entries"]
    k = at % len(entries) if entries else 0
    if how == 1 and len(entries) > 1:
        entries[k], entries[k - 1] = entries[k - 1], entries[k]
    elif how == 2 and entries:
        entries.insert(k, list(entries[k]))
    elif how == 3 and entries:
        entries[k][0] = ["", "a" * 4097, b"a", 3][at % 4]
    elif how == 4 and entries:
        entries[k][1] = [b"x" * 31, b"x" * 33, "h" * 32, None][at % 4]
    elif how == 5 and entries:
        entries[k] = entries[k] + [1] if at % 2 else entries[k][:1]
    elif how == 6:
        doc["level"] = [-1, 65, "0", None, True][at % 5]
    elif how == 7:
        doc["extra"] = at
    elif how == 8:
        return {"level": doc["level"]} if at % 2 else [doc["entries"], doc["level"]]
    elif how == 9:
        doc["entries"] = []
    return doc


TREE_DOCS = st.builds(
    mutate,
    st.builds(
        valid_doc, st.integers(0, 3), st.lists(st.text(alphabet="ab\u00e9/", min_size=1, max_size=3), max_size=6)
    ),
    st.integers(0, 9),
    st.integers(0, 20),
)


@settings(max_examples=300, deadline=None)
@given(TREE_DOCS, st.booleans())
def test_the_node_reader_accepts_exactly_what_decode_accepts(doc, reorder):
    import msgpack

    if reorder and isinstance(doc, dict):
        doc = dict(reversed(list(doc.items())))
    try:
        body = msgpack.packb(doc, use_bin_type=True)
    except (TypeError, ValueError):
        return
    raw = b"tree\0" + body
    try:
        want = decode(raw)
    except BadInput:
        with pytest.raises(BadInput):
            parse_node(raw)
        return
    assert parse_node(raw) == (want.level, want.entries)


def test_the_node_reader_refuses_other_kinds_and_damaged_bytes():
    good = Tree(0, (("a", VALUES[0]),)).encode()
    for raw in (Blob(b"x").encode(), good[:-1], good + b"\0", b"tree\0\xc1", b"tree"):
        with pytest.raises(BadInput):
            parse_node(raw)


class CountingStore(MemoryObjectStore):
    """A memory store that counts reads, to check how many nodes an operation touches."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0

    def get_raw(self, h: Hash) -> bytes:
        self.reads += 1
        return super().get_raw(h)


def test_reads_touch_a_logarithmic_number_of_nodes():
    store = CountingStore()
    ref = big_map(40_000, seed=6)
    root = Namespace(store).update(Namespace.empty(), ref)
    depth = store.get(root).level + 1
    names = sorted(ref)

    def reads(op) -> int:
        store.reads = 0
        op(Namespace(store))
        return store.reads

    assert reads(lambda ns: ns.get(root, names[12345])) == depth
    in_dir = [n for n in names if n.startswith("dir17/")]
    assert reads(lambda ns: list(ns.items(root, "dir17/"))) <= depth + 2 * len(in_dir) // TARGET_FANOUT + 4
    assert reads(lambda ns: list(ns.items(root, "dir17/file-0123"))) <= depth + 2
    for k in (1, 10):
        other = Namespace(store).update(root, {n: VALUES[7] for n in names[:: len(names) // k][:k]})
        assert reads(lambda ns, other=other: list(ns.diff(root, other))) <= 2 * k * depth + 2


def test_one_namespace_shared_by_threads():
    import threading

    ns = Namespace(MemoryObjectStore())
    base = big_map(5000, seed=8)
    root = ns.update(ns.empty(), base)
    results: dict[int, Hash] = {}
    errors: list[BaseException] = []

    def work(t: int) -> None:
        try:
            mine = root
            for i in range(40):
                mine = ns.update(mine, {f"t{t}/{i}": VALUES[t], sorted(base)[t * 97 + i]: None})
                assert ns.get(mine, f"t{t}/{i}") == VALUES[t]
            results[t] = mine
        except BaseException as exc:  # reported by the main thread below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=60)
    assert not errors and len(results) == 4
    names = sorted(base)
    for t, got in results.items():
        want = {k: v for k, v in base.items() if k not in names[t * 97 : t * 97 + 40]}
        want.update({f"t{t}/{i}": VALUES[t] for i in range(40)})
        assert got == Namespace(ns.objects).update(Namespace.empty(), want)


def test_diff_across_different_heights():
    ns = Namespace(MemoryObjectStore())
    small = {f"dir{i}/file-{i:06d}": VALUES[i % 8] for i in range(0, 40)}
    large = {**small, **big_map(6000, seed=11)}
    a, b = ns.update(ns.empty(), small), ns.update(ns.empty(), large)
    assert ns.objects.get(a).level < ns.objects.get(b).level
    want = [(k, small.get(k), large[k]) for k in sorted(large) if small.get(k) != large[k]]
    assert list(Namespace(ns.objects).diff(a, b)) == want
    assert list(Namespace(ns.objects).diff(b, a)) == [(k, y, x) for k, x, y in want]
    assert list(ns.diff(ns.empty(), a)) == [(k, None, v) for k, v in sorted(small.items())]


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 64), st.lists(st.text(min_size=1, max_size=40), max_size=40), st.data())
def test_tree_bytes_equal_the_generic_codec(level, names, data):
    names = sorted(set(names))
    entries = tuple((n, data.draw(st.sampled_from(VALUES))) for n in names)
    if level > 0 and not entries:
        return
    tree = Tree(level, entries)
    assert tree.encode() == frame("tree", pack_body(tree.body()))
    assert decode(tree.encode()) == tree and tree.id == Hash.of(tree.encode())


def test_tree_entries_are_checked_and_normalised_on_every_path():
    h = VALUES[0]
    for bad in (
        (("", h),),
        (("a" * 4097, h),),
        (("b", h), ("a", h)),
        (("a", h), ("a", h)),
        (("a", h, h),),
        (("a", b"x" * 31),),
        ((b"a", h),),
        [("a", h), ("a", h)],
    ):
        with pytest.raises(BadInput):
            Tree(0, bad)
    converted = Tree(1, [["a", bytes(h)], ("b", h)])
    assert converted.entries == (("a", h), ("b", h))
    assert all(type(e) is tuple and type(e[1]) is Hash for e in converted.entries)
    assert converted == Tree(1, (("a", h), ("b", h)))
    assert converted.id == Tree(1, (("a", h), ("b", h))).id


def test_tree_converts_plain_byte_ids_on_the_bulk_path():
    h = VALUES[1]
    tree = Tree(0, (("a", bytes(h)), ("b", h)))
    assert all(type(v) is Hash for _, v in tree.entries)
    assert tree.id == Tree(0, (("a", h), ("b", h))).id
    with pytest.raises(BadInput):
        Tree(0, (("a", bytes(h)), ("b", bytes(31))))
