"""Header names and values are checked at admission (E014 naming the header), and a credential that
would break its header at send time makes the effect `not_sent`, never `unknown`: nothing left."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from target import Target

from reelstore import Store
from reelstore.errors import BadInput, EffectFailed


@pytest.fixture
def target(tmp_path: Path):
    with Target(tmp_path / "ledger.jsonl") as t:
        yield t


@pytest.mark.parametrize(
    ("name", "value", "named"),
    [
        ("X-A", "a\r\nX-Injected: 1", "header X-A has a control character"),
        ("X-A", "a\nb", "header X-A has a control character"),
        ("X-A", "a\x00b", "header X-A has a control character"),
        ("Bad Name", "a", "header name 'Bad Name'"),
        ("X-A:\r\nX-B", "a", "header name"),
    ],
)
def test_a_bad_header_is_refused_at_admission_naming_it(
    reel, tmp_path: Path, target: Target, name: str, value: str, named: str
) -> None:
    Store.init(tmp_path)
    reel("fork", "v", check=True)
    op = {"method": "POST", "url": f"{target.url}/blind/x", "headers": {name: value}}
    proc = reel("effect", "v", "--adapter", "http", "--op", json.dumps(op))
    assert proc.returncode == 6 and b"E014" in proc.stderr and named.encode() in proc.stderr, proc.stderr
    assert b"Traceback" not in proc.stderr
    op["headers"] = {"X-A": "fine"}  # control: the same op with a good header is admitted
    reel("effect", "v", "--adapter", "http", "--op", json.dumps(op), check=True)


def test_a_credential_with_a_line_break_is_not_sent(tmp_path: Path, target: Target) -> None:
    store = Store.init(tmp_path / "s")
    store.secrets.put("bad", "token\r\nX-Injected: 1")
    store.secrets.put("good", "token")
    v = store.fork("v")
    v.effect("http", {"method": "POST", "url": f"{target.url}/blind/x", "headers": {"X-A": {"$secret": "bad"}}})
    with pytest.raises(EffectFailed) as err:
        v.commit()
    assert "not sent" in err.value.message and "X-A" in err.value.message and target.ledger() == []
    w = store.fork("w")  # control: the same effect with a clean credential is sent
    w.effect("http", {"method": "POST", "url": f"{target.url}/blind/x", "headers": {"X-A": {"$secret": "good"}}})
    w.commit()
    assert len(target.ledger()) == 1


def test_python_api_refuses_the_same(tmp_path: Path, target: Target) -> None:
    v = Store.init(tmp_path / "s").fork("v")
    with pytest.raises(BadInput) as err:
        v.effect("http", {"method": "POST", "url": f"{target.url}/blind/x", "headers": {"X-A": "a\r\nb: c"}})
    assert err.value.code == "E014" and "X-A" in err.value.message
