"""`json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)` for small documents, written
without importing `json`.

`cat-file -p` prints an object as that JSON. Importing `json` costs a start-up ~1.2 ms (the package
loads its decoder too, and the two compile six patterns), more than writing a small object here.
This writes the same text for what objects are made of: dicts with str keys, lists and tuples, str,
int, bool and None, each of exactly that type. Any other value (a float, another key type, a subclass)
leaves the whole document to `json` itself, so the text never differs.
"""

from __future__ import annotations

from typing import Any

_ESCAPES = {i: f"\\u{i:04x}" for i in range(0x20)}
_ESCAPES.update({ord("\\"): "\\\\", ord('"'): '\\"', ord("\b"): "\\b", ord("\f"): "\\f", ord("\n"): "\\n",
                 ord("\r"): "\\r", ord("\t"): "\\t"})
"""What json's encoder escapes when it may write any non-ASCII character as it is."""


class _Other(Exception):
    """A value this module does not write."""


def dumps(value: Any) -> str:
    """The text `json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)` returns."""
    out: list[str] = []
    try:
        _write(value, out, "\n")
    except _Other:
        import json

        return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)
    return "".join(out)


def _write(value: Any, out: list[str], newline: str) -> None:
    """Append `value`'s text; `newline` is a line break and the indent of the line `value` is on."""
    kind = type(value)
    if kind is str:
        out.append(f'"{value.translate(_ESCAPES)}"')
    elif value is None:
        out.append("null")
    elif kind is bool:
        out.append("true" if value else "false")
    elif kind is int:
        out.append(repr(value))
    elif kind is dict:
        if not value:
            out.append("{}")
            return
        if any(type(key) is not str for key in value):
            raise _Other
        inner, sep = newline + "  ", "{"
        for key in sorted(value):
            out.append(f'{sep}{inner}"{key.translate(_ESCAPES)}": ')
            _write(value[key], out, inner)
            sep = ","
        out.append(newline + "}")
    elif kind is list or kind is tuple:
        if not value:
            out.append("[]")
            return
        inner, sep = newline + "  ", "["
        for item in value:
            out.append(sep + inner)
            _write(item, out, inner)
            sep = ","
        out.append(newline + "]")
    else:
        raise _Other
