"""Strict operations and honest numbers: an unknown key in an http or fs op is refused (E014 naming
it) at every door, and a float is stored in one canonical encoding and sent in its shortest text."""

from __future__ import annotations

import json
import math
from pathlib import Path

import msgpack
import pytest
from target import Target

from reelstore.api import Store
from reelstore.codec import freeze, pack_body, unpack_body
from reelstore.errors import BadInput
from reelstore.objects import Effect
from reelstore.objects.block import decode


@pytest.mark.parametrize(
    ("adapter", "op", "key"),
    [
        ("http", {"method": "POST", "url": "http://127.0.0.1:9/pay", "jsn": {"amount": 5}}, "jsn"),
        ("fs", {"action": "write", "path": "out/a.txt", "contnet": "x"}, "contnet"),
    ],
)
def test_unknown_op_key_is_refused_in_the_api_naming_it(tmp_path: Path, adapter: str, op: dict, key: str) -> None:
    store = Store.init(tmp_path / "s")
    store.fork("v")
    with pytest.raises(BadInput) as refused:
        store.handle("v").effect(adapter, op)
    assert repr(key) in refused.value.message and refused.value.details["field"] == f"op.{key}"
    assert len(store.status("v").effects) == 0  # nothing was queued


def test_unknown_op_key_is_refused_by_reel_effect(tmp_path: Path, reel) -> None:
    reel("init", check=True)
    reel("fork", "v", check=True)
    op = {"method": "POST", "url": "http://127.0.0.1:9/pay", "jsn": {"amount": 5}}
    done = reel("effect", "v", "--adapter", "http", "--op", json.dumps(op))
    assert done.returncode == 6 and b"E014" in done.stderr and b"'jsn'" in done.stderr, done.stderr
    status = json.loads(reel("--json", "status", "v", check=True).stdout)
    assert status["effects"] == []


def test_a_float_is_sent_in_its_shortest_text(tmp_path: Path) -> None:
    store = Store.init(tmp_path / "s")
    with Target(tmp_path / "ledger.jsonl") as target:
        op = {
            "method": "POST",
            "url": f"{target.url}/blind/refund",
            "json": {"amount": 0.7, "rate": 1e-7, "n": 3, "whole": 2.0},
        }
        with store.view("v") as v:
            made = v.effect("http", op)
        assert made.op["json"]["amount"] == 0.7
        sent = target.ledger()
    assert len(sent) == 1
    assert sent[0]["body"] == '{"amount":0.7,"n":3,"rate":1e-07,"whole":2.0}'


@pytest.mark.parametrize("bad", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_numbers_are_refused_naming_the_field(tmp_path: Path, reel, bad: str) -> None:
    reel("init", check=True)
    reel("fork", "v", check=True)
    text = '{"method": "POST", "url": "http://127.0.0.1:9/pay", "json": {"refund": {"amount": AMOUNT}}}'
    text = text.replace("AMOUNT", bad)
    done = reel("effect", "v", "--adapter", "http", "--op", text)
    assert done.returncode == 6 and b"E014" in done.stderr and b"op.json.refund.amount" in done.stderr, done.stderr


def test_floats_have_one_encoding() -> None:
    # the same value gives the same bytes, and therefore the same id, however it was written
    assert pack_body(freeze({"a": 0.7})) == pack_body(freeze({"a": float("0.70")})) == pack_body({"a": 7e-1})
    assert unpack_body(pack_body({"a": 0.1 + 0.2})) == {"a": 0.1 + 0.2}
    assert pack_body(1) != pack_body(1.0)  # an integer and a float are different JSON values
    # a float 32, or a double holding NaN, is not canonical: refused on decode
    with pytest.raises(BadInput):
        unpack_body(msgpack.packb(0.5, use_single_float=True))
    with pytest.raises(BadInput):
        unpack_body(msgpack.packb(math.nan))
    with pytest.raises(BadInput) as refused:
        freeze({"x": [1, math.inf]}, "op")
    assert "op.x[1]" in refused.value.message


def test_an_effect_with_a_float_round_trips_through_its_id() -> None:
    e = Effect(
        adapter="http",
        effect_class="C",
        resource="http:POST:http://h/p",
        op=freeze({"method": "POST", "url": "http://h/p", "json": {"amount": 0.7}}),
        delivery="blind",
        version_ref=None,
        principal="p",
        meta=freeze({}),
    )
    again = decode(e.encode())
    assert isinstance(again, Effect)
    assert again.id == e.id and again.op["json"]["amount"] == 0.7
