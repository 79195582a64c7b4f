"""Typed results: status, diff, views, ops and commit return frozen dataclasses of the store's own
types, delta ops are `Put`/`Remove` NamedTuples that encode exactly as the bare tuples did, and the
`--json` documents the CLI prints from them keep their shape, key for key."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from reelstore import CommitResult, NameChange, Operation, Put, Remove, Store, ViewStatus, ViewSummary
from reelstore.objects import Blob, Capability, Delta, Effect, decode

# Computed with the code before delta ops were NamedTuples (main at d3c4263): the same ops must keep
# these bytes and this id, or every stored view that carries a delta would change its id.
GOLDEN_DELTA_ID = "12621d8fde3aef2a7ed91c0ee2acc941474e2364cadf0dd28718c0497e141402"
GOLDEN_DELTA_BYTES = (
    "64656c74610082a462617365c4208aa316248ced79655c63caa9fb26d91d3572a7ee1513995509e53ab1b1a0edcaa36f70739293a37075"
    "74a9646f63732f782e6d64c420d1007f8f4deb093a300ade4e6fe140c6346e58dc16eb95cead7f13920e5dd59592a672656d6f7665a76f"
    "6c642e747874"
)


def test_delta_ops_are_named_tuples_with_the_same_bytes_and_id() -> None:
    a, b = Blob(b"a").id, Blob(b"b").id
    typed = Delta(a, (Put("put", "docs/x.md", b), Remove("remove", "old.txt")))
    bare = Delta(a, (("put", "docs/x.md", b), ("remove", "old.txt")))
    assert typed.encode().hex() == bare.encode().hex() == GOLDEN_DELTA_BYTES
    assert typed.id.hex() == bare.id.hex() == GOLDEN_DELTA_ID
    assert typed == bare
    again = decode(typed.encode())
    assert isinstance(again, Delta)
    put, remove = again.ops
    assert type(put) is Put and (put.op, put.name, put.id) == ("put", "docs/x.md", b)
    assert type(remove) is Remove and (remove.op, remove.name) == ("remove", "old.txt")
    assert put == ("put", "docs/x.md", b), "a Put is still the tuple the wire format holds"
    assert typed.to_json()["ops"] == [["put", "docs/x.md", b.hex()], ["remove", "old.txt"]]


def _scenario(tmp_path: Path, run) -> tuple[Store, Effect]:
    """A trunk with docs/old and docs/keep; view `a` adds docs/one, changes docs/keep, removes
    docs/old and queues one fs effect."""
    assert run("init").exit_code == 0
    store = Store.open(tmp_path)
    with store.view("seed") as seed:
        seed.put("docs/old", b"old")
        seed.put("docs/keep", b"k0")
    v = store.fork("a", caps=["read,write,delete=docs/", "fire_c=fs:out/;budget=2"])
    v.put("docs/one", b"1")
    v.put("docs/keep", b"k1")
    v.rm("docs/old")
    effect = v.effect("fs", {"action": "write", "path": "out/f", "content": "c"})
    return store, effect


def _json(run, *args: str) -> object:
    result = run("--json", *args)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_status_is_typed_and_its_json_keeps_every_key(tmp_path: Path, run) -> None:
    store, effect = _scenario(tmp_path, run)
    st = store.status("a")
    assert isinstance(st, ViewStatus)
    assert st.changes == (
        Put("put", "docs/keep", Blob(b"k1").id),
        Remove("remove", "docs/old"),
        Put("put", "docs/one", Blob(b"1").id),
    )
    assert st.effects == (effect,) and all(isinstance(c, Capability) for c in st.caps)
    with pytest.raises(dataclasses.FrozenInstanceError):
        st.view = "b"  # type: ignore[misc]
    live = store.repo.refs.get("refs/views/a")
    assert live is not None
    want = {
        "view": "a",
        "id": live.hex(),
        "parent": "refs/heads/main",
        "base": st.base.hex() if st.base else None,
        "boundary": "autonomous",
        "depth": 1,
        "trunk": "main",
        "changes": [
            {"op": "put", "name": "docs/keep", "id": Blob(b"k1").id.hex()},
            {"op": "remove", "name": "docs/old", "id": None},
            {"op": "put", "name": "docs/one", "id": Blob(b"1").id.hex()},
        ],
        "effects": [
            {
                "index": 0,
                "id": effect.id.hex(),
                "adapter": "fs",
                "class": "C",
                "resource": "fs:out/f",
                "delivery": effect.delivery,
                "op": {"action": "write", "path": "out/f", "content": "c"},
            }
        ],
        "caps": ["read,write,delete=docs/", "fire_c=fs:out/;budget=2"],
        "merged": [],
    }
    assert st.base is not None and st.to_json() == want
    assert _json(run, "status", "a") == want
    assert _json(run, "status") == {"views": [want]}


def test_diff_and_views_are_typed_and_their_json_keeps_every_key(tmp_path: Path, run) -> None:
    store, effect = _scenario(tmp_path, run)
    rows = store.open_view("a").diff()
    assert all(isinstance(r, NameChange) for r in rows)
    assert [(r.name, r.status, r.old, r.new) for r in rows] == [
        ("docs/keep", "modified", Blob(b"k0").id, Blob(b"k1").id),
        ("docs/old", "removed", Blob(b"old").id, None),
        ("docs/one", "added", None, Blob(b"1").id),
    ]
    k0, k1, old, one = (Blob(d).id.hex() for d in (b"k0", b"k1", b"old", b"1"))
    assert _json(run, "diff", "a") == {
        "view": "a",
        "changes": [
            {"op": "put", "name": "docs/keep", "id": k1, "old": k0, "status": "modified"},
            {"op": "remove", "name": "docs/old", "id": None, "old": old, "status": "removed"},
            {"op": "put", "name": "docs/one", "id": one, "old": None, "status": "added"},
        ],
    }
    [row] = store.views()
    assert isinstance(row, ViewSummary) and (row.name, row.changes, row.effects, row.remote) == ("a", 3, 1, None)
    live = store.repo.refs.get("refs/views/a")
    assert live is not None and row.id == live
    assert _json(run, "views") == {
        "views": [
            {
                "name": "a",
                "id": live.hex(),
                "parent": "refs/heads/main",
                "boundary": "autonomous",
                "depth": 1,
                "changes": 3,
                "effects": 1,
                "remote": None,
            }
        ]
    }


def test_commit_and_ops_results_are_frozen_and_render_as_before(tmp_path: Path, run) -> None:
    store, effect = _scenario(tmp_path, run)
    result = store.commit("a", "m")
    assert isinstance(result, CommitResult) and result.record is not None and result.drain is not None
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.record = None  # type: ignore[misc]
    [op] = store.ops()
    assert isinstance(op, Operation) and op.effect == effect and op.state == "succeeded" and op.history == ()
    with pytest.raises(dataclasses.FrozenInstanceError):
        op.state = "unknown"  # type: ignore[misc]
    [listed] = _json(run, "ops")  # type: ignore[misc]
    assert listed == op.to_json()
    shown = _json(run, "ops", "show", op.op)
    assert isinstance(shown, dict) and [e["state"] for e in shown["history"]] == ["unknown", "succeeded"]
    assert set(shown) == set(op.to_json()) | {"history", "operator", "view", "intent", "request", "reconciliation"}
    from reelstore.drain import operator

    st = operator.state(store.repo, op.op)
    assert (st.events, st.notices, st.acks, st.closed) == ((), (), (), None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        st.assignee = "x"  # type: ignore[misc]
    assert (
        shown["operator"]
        == st.to_json(0)
        == {
            "assignee": None,
            "escalated_to": None,
            "deadline": None,
            "overdue": False,
            "notices": [],
            "acks": [],
            "closed": None,
            "events": [],
        }
    )


def test_a_diff_of_two_runs_is_typed_and_its_json_keeps_every_key(tmp_path: Path, run) -> None:
    store, effect = _scenario(tmp_path, run)
    other = store.fork("b", caps=["read,write,delete=docs/", "fire_c=fs:out/;budget=2"])
    other.put("docs/one", b"2")
    from reelstore.kernel.rundiff import EffectChange, RunDiff, diff_runs

    result = diff_runs(store.repo, "a", "b")
    assert isinstance(result, RunDiff) and all(isinstance(e, EffectChange) for e in result.effects)
    assert [(n.name, n.status, n.old, n.new) for n in result.names] == [
        ("docs/keep", "modified", Blob(b"k1").id, Blob(b"k0").id),
        ("docs/old", "added", None, Blob(b"old").id),
        ("docs/one", "modified", Blob(b"1").id, Blob(b"2").id),
    ]
    assert [(e.status, e.a, e.b) for e in result.effects] == [("removed", effect, None)]
    k0, k1, old, one, two = (Blob(d).id.hex() for d in (b"k0", b"k1", b"old", b"1", b"2"))
    assert _json(run, "diff", "a", "b") == {
        "a": "a",
        "b": "b",
        "names": [
            {"status": "modified", "name": "docs/keep", "a": k1, "b": k0},
            {"status": "added", "name": "docs/old", "a": None, "b": old},
            {"status": "modified", "name": "docs/one", "a": one, "b": two},
        ],
        "effects": [
            {
                "status": "removed",
                "b": None,
                "diff": "",
                "a": {
                    "id": effect.id.hex(),
                    "adapter": "fs",
                    "resource": "fs:out/f",
                    "class": "C",
                    "op": {"action": "write", "path": "out/f", "content": "c"},
                },
            }
        ],
    }


def test_a_hold_is_typed_and_hold_and_release_print_what_they_did(tmp_path: Path, run) -> None:
    store, _ = _scenario(tmp_path, run)
    held = _json(run, "hold", "--why", "audit")
    assert isinstance(held, dict) and set(held) == {"why", "by", "time"} and held["why"] == "audit"
    from reelstore import Hold

    now = store.repo.files.read("HOLD")
    assert now is not None and json.loads(now) == held
    assert _json(run, "release") == {"released": held}
    assert _json(run, "release") == {"released": None}
    mine = store.hold("again", "me")
    assert isinstance(mine, Hold) and (mine.why, mine.by) == ("again", "me")
    assert store.release() == mine and store.release() is None
