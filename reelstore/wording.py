"""Counted nouns and short lists in messages: "1 effect", "2 effects", never "1 effects" or "2 effect(s)";
"a, b and 3 more"."""

from __future__ import annotations

from collections.abc import Sequence

_IRREGULAR = {"entry": "entries", "was": "were", "is": "are"}


def plural(count: int, noun: str) -> str:
    """`count` and `noun`, its last word in the plural unless count is 1 ("1 problem", "3 problems",
    "2 reflog entries", "5 recorded reads")."""
    if count == 1:
        return f"{count} {noun}"
    head, _, last = noun.rpartition(" ")
    many = _IRREGULAR.get(last, last + "s")
    return f"{count} {head + ' ' if head else ''}{many}"


def listed(items: Sequence[str], most: int) -> str:
    """The first `most` of `items`, comma-separated, and how many more there are ("a, b and 3 more")."""
    more = len(items) - most
    return ", ".join(items[:most]) + (f" and {more} more" if more > 0 else "")
