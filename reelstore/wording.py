"""Counted nouns in messages: "1 effect", "2 effects", never "1 effects"."""

from __future__ import annotations

_IRREGULAR = {"entry": "entries", "was": "were", "is": "are"}


def plural(count: int, noun: str) -> str:
    """`count` and `noun`, the noun in the plural unless count is 1 ("1 problem", "3 problems")."""
    if count == 1:
        return f"{count} {noun}"
    return f"{count} {_IRREGULAR.get(noun, noun + 's')}"
