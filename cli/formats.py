"""git's `%(atom[:modifier])` output formats, compiled once and rendered per item.

`cat-file --batch-check=FORMAT` and `for-each-ref --format` share this: each command supplies its
atoms; an atom is given its modifier (`short`, `short=7`, `lstrip=2`, …) at compile time and may
refuse it, so a bad format fails before any output, with E014.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Generic, TypeVar

from reelstore.errors import BadInput

T = TypeVar("T")
Getter = Callable[[T], str]
AtomFactory = Callable[[str | None], Getter[T]]
"""Given the modifier (None if the atom has none), return the function that renders one item."""

_TOKEN = re.compile(r"%\(([^)]*)\)|%%|%([0-9a-fA-F]{2})|%")


class Format(Generic[T]):
    """A compiled format: `render(item)` is the line for one item; `atoms` names the atoms used."""

    def __init__(self, fmt: str, atoms: Mapping[str, AtomFactory[T]], hex_escapes: bool = True) -> None:
        self.spec = fmt
        self.parts: list[str | Getter[T]] = []
        self.atoms: set[str] = set()
        pos = 0
        for m in _TOKEN.finditer(fmt):
            self.parts.append(fmt[pos : m.start()])
            pos = m.end()
            if m.group(1) is not None:
                name, colon, modifier = m.group(1).partition(":")
                factory = atoms.get(name)
                if factory is None:
                    raise BadInput(f"unknown format element %({m.group(1)}); known: {', '.join(sorted(atoms))}")
                self.parts.append(factory(modifier if colon else None))
                self.atoms.add(name)
            elif m.group(2) and hex_escapes:
                self.parts.append(chr(int(m.group(2), 16)))
            elif m.group(0) == "%%":
                self.parts.append("%")
            else:
                self.parts.append(m.group(0))
        self.parts.append(fmt[pos:])

    def render(self, item: T) -> str:
        return "".join(p if isinstance(p, str) else p(item) for p in self.parts)


def plain(get: Callable[[T], str], atom: str) -> AtomFactory[T]:
    """An atom that takes no modifier."""

    def factory(modifier: str | None) -> Getter[T]:
        if modifier is not None:
            raise BadInput(f"%({atom}) takes no modifier, not {modifier!r}")
        return get

    return factory


def hex_id(get: Callable[[T], str], atom: str, default_short: int = 12) -> AtomFactory[T]:
    """An id atom: `%(A)` the full id, `%(A:short)` its first 12 digits, `%(A:short=N)` its first N."""

    def factory(modifier: str | None) -> Getter[T]:
        if modifier is None:
            return get
        word, eq, number = modifier.partition("=")
        if word != "short" or (eq and not number.isdigit()):
            raise BadInput(f"%({atom}:{modifier}): the modifier is short or short=N")
        n = max(4, int(number)) if eq else default_short
        return lambda item: get(item)[:n]

    return factory


def ref_name(get: Callable[[T], str], shorten: Callable[[T], str], atom: str) -> AtomFactory[T]:
    """A ref-name atom with git's modifiers: `short`, `lstrip=N` and `rstrip=N` (N < 0 counts from the
    other end: `lstrip=-2` keeps the last two components)."""

    def factory(modifier: str | None) -> Getter[T]:
        if modifier is None:
            return get
        if modifier == "short":
            return shorten
        word, eq, number = modifier.partition("=")
        if word not in ("lstrip", "rstrip") or not eq or not re.fullmatch(r"-?\d+", number):
            raise BadInput(f"%({atom}:{modifier}): the modifier is short, lstrip=N or rstrip=N")
        n = int(number)
        return lambda item: strip(get(item), n, word == "lstrip")

    return factory


def strip(name: str, n: int, left: bool) -> str:
    """git's lstrip/rstrip: drop n `/`-components from one end (n < 0: keep -n from the other)."""
    parts = name.split("/")
    if n < 0:
        keep = max(0, -n)
        kept = parts[-keep:] if left else parts[:keep]
        return "/".join(kept) if keep else ""
    kept = parts[n:] if left else parts[: max(0, len(parts) - n)]
    return "/".join(kept)
