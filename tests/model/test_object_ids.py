"""The object model's bytes and ids are fixed: each kind encodes to the same canonical bytes (so the
same id) whatever class machinery builds it, decodes back to an equal value, and is immutable."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from reelstore.codec import FrozenMap
from reelstore.objects import (
    KIND_HOMES,
    KINDS,
    Blob,
    Capability,
    Delta,
    Effect,
    Effects,
    Put,
    Record,
    Tree,
    View,
    decode,
)

GOLDEN = {  # ids of stored objects: a change here changes every stored id.
    # View's changed once, on purpose: every body key is now written, `approvals` included (nothing released).
    "Blob": "5523eb14371b0e62aed23325264db71adcf849fb26e3b8ddecd2a9d6dc8be82c",
    "Record": "e037bd522845aa128428d2ee43966c8508edb4116eda9f251b7d034b01531ce0",
    "View": "1f3a710bf92be1f525ae66777567a806f91befeac6715618a3c9f9408188ffd3",
    "Effect": "f8136e07d4d8c6785a9aa2d4e2c1664ca721a35c93852326464e5575537c752e",
    "Capability": "b7bd10de5071f9f576f3ec3effaf997a4afc7c83a2ae11eedf2d62e0b7220b9d",
    "Effects": "971286cfe37c22ecf426774b18fb8c6f69ff335395263c113325f8f1926666f1",
    "Tree": "6b03ad7bbac92ecd3141bc54bdd87664375cd054d100993c9fced90f424c4c41",
    "Delta": "bb71ba6e5f65acfc029fea075315ee4586abfeebd05295005e6ce1578c33fcdf",
}


def test_object_model_keeps_its_bytes_and_ids() -> None:
    blob = Blob(b"hello")
    rec = Record(parent=None, namespace=blob.id, author="a", message="m", time=7)
    view = View(
        parent="refs/heads/main", base=rec.id, namespace=blob.id, caps=(blob.id,), meta=FrozenMap({"name": "v"})
    )
    eff = Effect(adapter="fs", effect_class="B", resource="fs:a", op=FrozenMap({"write": "x"}))
    cap = Capability.parse("read,write=docs/")
    made = [
        blob,
        rec,
        view,
        eff,
        cap,
        Effects((eff.id,)),
        Tree(0, (("a", blob.id),)),
        Delta(rec.id, (Put("put", "a", blob.id),)),
    ]
    assert {type(o).__name__: o.id.hex() for o in made} == GOLDEN
    for obj in made:
        again = decode(obj.encode())
        assert again == obj and hash(again) == hash(obj) and again.id == obj.id
        assert pickle.loads(pickle.dumps(obj)) == obj
        with pytest.raises(dataclasses.FrozenInstanceError):
            obj.kind = "x"  # type: ignore[misc]
    assert view.meta["name"] == "v" and View(parent="p", base=None, namespace=blob.id).meta == FrozenMap()
    assert dataclasses.replace(view, depth=2).depth == 2 and dataclasses.replace(view, depth=2).id != view.id


def test_every_kind_is_a_frozen_dataclass() -> None:
    assert set(KINDS) == set(KIND_HOMES)  # every kind the lazy loader knows is registered, and no other
    for kind, cls in KINDS.items():
        assert dataclasses.is_dataclass(cls), kind
        assert cls.__dataclass_params__.frozen, kind  # type: ignore[attr-defined]
