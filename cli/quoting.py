"""git's quoting of path names in line-oriented output (`core.quotePath`), so a name holding a tab or
a newline cannot forge or split a line."""

from __future__ import annotations

_ESCAPES = {
    0x07: "\\a",
    0x08: "\\b",
    0x09: "\\t",
    0x0A: "\\n",
    0x0B: "\\v",
    0x0C: "\\f",
    0x0D: "\\r",
    0x22: '\\"',
    0x5C: "\\\\",
}


def quote_path(name: str, fully: bool = True) -> str:
    """`name` as git prints it: unchanged if nothing in it needs quoting, else in double quotes with
    C escapes for control characters, `"` and `\\`, and (with `fully`, git's default
    core.quotePath=true) octal escapes for every byte of a non-ASCII character."""
    data = name.encode("utf-8", "surrogateescape")
    if not any(b < 0x20 or b in (0x22, 0x5C, 0x7F) or (fully and b >= 0x80) for b in data):
        return name
    out = []
    for b in data:
        if b in _ESCAPES:
            out.append(_ESCAPES[b])
        elif b < 0x20 or b == 0x7F or (fully and b >= 0x80):
            out.append(f"\\{b:03o}")
        else:
            out.append(chr(b))
    text = "".join(out)
    if not fully:
        text = text.encode("latin-1").decode("utf-8", "surrogateescape")
    return f'"{text}"'
