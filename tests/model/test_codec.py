"""The canonical codec: one encoding per value, and a decoder that trusts nothing."""

from __future__ import annotations

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reelstore.codec import MAX_DEPTH, FrozenMap, frame, freeze, pack_body, split_frame, thaw, unpack_body
from reelstore.errors import BadInput

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**64 - 1),
    st.text(max_size=20),
    st.binary(max_size=20),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(values)
def test_round_trip_is_exact(value):
    body = pack_body(value)
    back = unpack_body(body)
    assert pack_body(back) == body
    assert thaw(back) == thaw(freeze(value))


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.text(max_size=8), scalars, min_size=2, max_size=6), st.randoms())
def test_map_encoding_ignores_insertion_order(d, rnd):
    keys = list(d)
    rnd.shuffle(keys)
    assert pack_body({k: d[k] for k in keys}) == pack_body(d)


def test_bytes_and_str_stay_distinct():
    assert pack_body(b"a") != pack_body("a")
    assert unpack_body(pack_body(b"a")) == b"a"
    assert unpack_body(pack_body("a")) == "a"


@pytest.mark.parametrize(
    "body",
    [
        msgpack.packb({"b": 1, "a": 2}),  # keys out of order
        b"\xcd\x00\x01",  # 1 as uint16: not the shortest form
        msgpack.packb(1) + b"\x00",  # trailing bytes
        msgpack.packb(1.5, use_single_float=True),  # a float 32: floats are always doubles
        msgpack.packb(float("nan")),  # NaN: not a JSON number
        msgpack.packb(msgpack.ExtType(1, b"x")),  # extension type
        b"\x82\xa1a\x01\xa1a\x02",  # duplicate key
        msgpack.packb({1: 2}),  # non-string key
        b"\xa2\xff\xfe",  # invalid UTF-8 in a str
        b"\x91" * (MAX_DEPTH + 5) + b"\xc0",  # too deep
        b"\xdd\xff\xff\xff\xff",  # array claiming 4G items
        b"",
    ],
)
def test_non_canonical_or_malformed_bodies_are_e014(body):
    with pytest.raises(BadInput):
        unpack_body(body)


@pytest.mark.parametrize("value", [float("inf"), {1: "x"}, 2**64, -(2**63) - 1, object(), "\udc80"])
def test_unencodable_values_are_e014(value):
    with pytest.raises(BadInput):
        pack_body(value)


def test_freeze_is_immutable_and_hashable():
    f = freeze({"a": [1, {"b": b"x"}]})
    assert isinstance(f, FrozenMap)
    assert f["a"][1]["b"] == b"x"
    assert hash(f) == hash(freeze({"a": [1, {"b": b"x"}]}))
    with pytest.raises(TypeError):
        f["a"] = 1  # type: ignore[index]


def test_frame_and_split():
    raw = frame("blob", pack_body(b"hi"))
    assert split_frame(raw) == ("blob", pack_body(b"hi"))
    for bad in (b"", b"\x00abc", b"Blob\x00x", b"bl0b\x00x", b"x" * 40 + b"\x00", b"no-nul-here"):
        with pytest.raises(BadInput):
            split_frame(bad)
