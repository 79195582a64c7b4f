"""cli/json_text writes exactly what json.dumps(indent=2, sort_keys=True, ensure_ascii=False) writes, and
`cat-file -p` prints objects through it without loading json."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from reelstore.cli.json_text import dumps
from reelstore.codec import FrozenMap
from reelstore.kernel import verbs as kernel
from reelstore.storage.repo import Repo


def _reference(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)


def _outcome(write: Any, value: Any) -> tuple[str, str]:
    try:
        return "text", write(value)
    except (TypeError, ValueError) as err:
        return type(err).__name__, str(err)


def _same(value: Any) -> None:
    """The same text, or the same error (json refuses keys it cannot sort, and objects it cannot write)."""
    assert _outcome(dumps, value) == _outcome(_reference, value)


_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12) | st.sampled_from(
    ["", "\x00\x1f\x7f", '"\\', "\b\f\n\r\t", "é\u2028\U0001f600", "\u0085"])
_SCALARS = st.none() | st.booleans() | st.integers() | _TEXT
_DOCS = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=4) | st.tuples(inner, inner)
                     | st.dictionaries(_TEXT, inner, max_size=4), max_leaves=25)


@settings(max_examples=1500)
@given(_DOCS)
def test_the_text_is_json_dumps_text(doc: Any) -> None:
    assert dumps(doc) == _reference(doc)


@settings(max_examples=300)
@given(_DOCS, st.floats(allow_nan=True) | st.sampled_from([1, None, True]), _DOCS)
def test_values_it_does_not_write_are_left_to_json_whole(doc: Any, odd: Any, other: Any) -> None:
    """A float, a non-str key (json turns 1, None and True into strings) or a subclass anywhere: json's text."""
    floats = ([doc, odd], {"a": doc, "b": [odd]})
    for value in floats if isinstance(odd, float) else ({odd: doc}, {odd: doc, "k": other}):
        _same(value)
    _same({"m": {"x": [doc]}, "n": MyInt(3)})


class MyInt(int):
    def __repr__(self) -> str:
        return "not-how-json-writes-it"


def test_a_mapping_that_is_not_a_dict_fails_as_json_fails() -> None:
    for value in ({"a": FrozenMap({"x": 1})}, [object()]):
        assert _outcome(dumps, value)[0] == "TypeError"
        _same(value)


def test_cat_file_p_prints_json_dumps_text(tmp_path: Path) -> None:
    repo = Repo.init(tmp_path)
    kernel.fork(repo, "v")
    kernel.put(repo, "v", "dir/a.txt", b"x")
    kernel.put(repo, "v", "b\n\u00e9\"q\".txt", b"y")
    view = repo.refs["refs/views/v"]
    record = repo.refs["refs/heads/main"]
    shown = repo.objects.get(view)
    ids = [view, record, shown.namespace, *shown.caps]  # type: ignore[attr-defined]
    script = "import sys; from reelstore.cli.main import main; main(sys.argv[1:])"
    kinds = set()
    for h in ids:
        obj = repo.objects.get(h)
        kinds.add(obj.kind)
        done = subprocess.run([sys.executable, "-c", script, "cat-file", "-p", h.hex()], cwd=tmp_path,
                              capture_output=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert done.stdout == (_reference(obj.to_json()) + "\n").encode("utf-8"), obj.kind
    assert kinds == {"view", "record", "tree", "capability"}
