"""`.reel/config`: INI in git-config style, edited in place so comments and order survive.

Keys are `section.key` or `section.subsection.key`; section and key names are case-insensitive
(stored lowercase), subsections are case-sensitive, as in git. A key may hold several values.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar, cast, overload

from reelstore.backend.fileio import atomic_write
from reelstore.errors import BadInput, StorageError

D = TypeVar("D")
_LETTERS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
_NAME_CHARS = _LETTERS | frozenset("0123456789-")
_SECTION_CHARS = _NAME_CHARS | {"."}


@functools.lru_cache(maxsize=1024)
def split_key(key: str) -> tuple[str, str | None, str]:
    """`a.b.c` → ('a', 'b', 'c'); `a.c` → ('a', None, 'c'). E014 if malformed. Remembered: a verb
    looks the same few keys up for every object it admits (a malformed key is not remembered)."""
    first, dot, rest = key.partition(".")
    if not dot or not rest:
        raise BadInput(f"config key {key!r} must look like section.key or section.subsection.key")
    sub, _, name = rest.rpartition(".")
    if not _is_name(first) or not (_is_name(name) and name[0].isalpha()) or (sub and any(c in sub for c in "\n\0")):
        raise BadInput(f"config key {key!r} has an invalid section or name")
    return first.lower(), (sub or None), name.lower()


def _is_name(text: str) -> bool:
    """Letters, digits and `-` only (the section and key names git allows), checked without a pattern
    compiled at every start for the first `get`."""
    return bool(text) and set(text) <= _NAME_CHARS


def _run(text: str, start: int, chars: frozenset[str]) -> int:
    """The end of the run of `chars` in `text` from `start`."""
    end = start
    while end < len(text) and text[end] in chars:
        end += 1
    return end


def _header(line: str) -> tuple[str, str | None] | None:
    """(section, subsection) if `line` is a section header, `[name]` or `[name "sub"]` with `\\` escapes
    in the subsection (unescaped here) and an optional `;`/`#` comment after it; None otherwise.

    Read with string methods, not a regular expression: a verb opening the store parses its config
    once, and compiling the two patterns would cost more than the parse. `\\s` and str.strip() agree on
    whitespace."""
    rest = line.lstrip()
    if rest[:1] != "[":
        return None
    rest = rest[1:].lstrip()
    end = _run(rest, 0, _SECTION_CHARS)
    if not end:
        return None
    name, rest = rest[:end].lower(), rest[end:]
    sub = None
    tail = rest.lstrip()
    if tail[:1] == '"' and len(tail) < len(rest):  # whitespace, then the quoted subsection
        chars: list[str] = []
        i = 1
        while i < len(tail) and tail[i] != '"':
            if tail[i] == "\\":
                i += 1
                if i == len(tail):
                    return None
            chars.append(tail[i])
            i += 1
        if i == len(tail):
            return None
        sub, tail = "".join(chars), tail[i + 1 :].lstrip()
    if tail[:1] != "]":
        return None
    tail = tail[1:].lstrip()
    return (name, sub) if not tail or tail[0] in ";#" else None


def _entry(line: str) -> tuple[str, str | None] | None:
    """(key, its raw value, or None for a bare key) if `line` is `key` or `key = value`; None otherwise."""
    rest = line.lstrip()
    if not rest or rest[0] not in _LETTERS:
        return None
    end = _run(rest, 1, _NAME_CHARS)
    key, rest = rest[:end].lower(), rest[end:].lstrip()
    if not rest:
        return key, None
    return (key, rest[1:].strip()) if rest[0] == "=" else None


def _escape_sub(sub: str) -> str:
    return sub.replace("\\", "\\\\").replace('"', '\\"')


def _value(raw: str | None) -> str:
    if raw is None:
        return "true"
    out: list[str] = []
    quoted, i = False, 0
    kept = 0  # length of `out` up to its last character that was quoted, escaped or not whitespace
    while i < len(raw):
        ch = raw[i]
        if ch == '"':
            quoted = not quoted
            kept = len(out)
        elif ch == "\\" and i + 1 < len(raw):
            i += 1
            out.append({"n": "\n", "t": "\t"}.get(raw[i], raw[i]))
            kept = len(out)
        elif ch in ";#" and not quoted and (i == 0 or raw[i - 1].isspace()):
            break
        else:
            out.append(ch)
            if quoted or not ch.isspace():
                kept = len(out)
        i += 1
    return "".join(out[:kept])


def _by_key(config: Config) -> dict[tuple[str, str | None, str], list[str]]:
    """Every key's values in file order: parsed once per change of the lines, not once per lookup
    (a verb looks keys up per object it admits)."""
    out: dict[tuple[str, str | None, str], list[str]] = {}
    for _, s, ss, k, v in config._scan():
        out.setdefault((s, ss, k), []).append(v)
    return out


def _quote(value: str) -> str:
    text = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    needs = text != text.strip() or any(c in text for c in ";#") or not text
    return f'"{text}"' if needs else text


def _decode(path: Path) -> str:
    """The file's text; E007 naming the line if it is not UTF-8 (reel writes nothing else)."""
    data = path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise StorageError(
            f"config {path} is damaged: line {line} is not UTF-8 (byte {exc.start}); fix or rewrite that line"
        ) from None


class Config:
    def __init__(self, path: Path | None = None, text: str = "") -> None:
        self.path = path
        if path is not None and path.exists():
            text = _decode(path)
        self.lines = text.split("\n")
        if self.lines and self.lines[-1] == "":
            self.lines.pop()
        self._derived: dict[Callable[[Config], Any], tuple[list[str], Any]] = {}
        self._batched = False

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Several edits written as one atomic save, so a crash leaves all of them or none (and an
        error inside the block leaves the config as it was)."""
        before, self._batched = list(self.lines), True
        try:
            yield
        except BaseException:
            self.lines = before
            raise
        finally:
            self._batched = False
        self.save()

    def derived(self, make: Callable[[Config], D]) -> D:
        """`make(self)`, remembered until the config's lines change (parsed service rules, say)."""
        hit = self._derived.get(make)
        if hit is not None and hit[0] == self.lines:
            return cast(D, hit[1])  # cached by `make`, so of its type
        value = make(self)
        self._derived[make] = (list(self.lines), value)
        return value

    def _scan(self) -> list[tuple[int, str, str | None, str, str]]:
        """(line index, section, subsection, key, value) for every entry."""
        out, section, sub = [], None, None
        for i, line in enumerate(self.lines):
            stripped = line.strip()
            if not stripped or stripped[0] in ";#":
                continue
            header = _header(line)
            if header is not None:
                section, sub = header
                continue
            entry = _entry(line)
            if entry is not None and section is not None:
                out.append((i, section, sub, entry[0], _value(entry[1])))
            else:
                where = f"{self.path}:{i + 1}" if self.path else f"line {i + 1}"
                raise BadInput(f"bad config line at {where}: {line!r}")
        return out

    def get_all(self, key: str) -> list[str]:
        return list(self.derived(_by_key).get(split_key(key), ()))

    @overload
    def get(self, key: str, default: str) -> str: ...

    @overload
    def get(self, key: str, default: None = None) -> str | None: ...

    def get(self, key: str, default: str | None = None) -> str | None:
        values = self.get_all(key)
        return values[-1] if values else default

    def get_bool(self, key: str, default: bool = False) -> bool:
        value = self.get(key)
        if value is None:
            return default
        if value.lower() in ("true", "yes", "on", "1"):
            return True
        if value.lower() in ("false", "no", "off", "0"):
            return False
        raise BadInput(f"config {key} = {value!r} is not a boolean")

    def items(self) -> list[tuple[str, str]]:
        return [(".".join(p for p in (s, ss, k) if p is not None), v) for _, s, ss, k, v in self._scan()]

    def subsections(self, section: str) -> list[str]:
        """The subsection names of `section`, in order of first appearance."""
        seen: dict[str, None] = {}
        for _, s, ss, _, _ in self._scan():
            if s == section.lower() and ss is not None:
                seen.setdefault(ss, None)
        return list(seen)

    def set(self, key: str, value: str, *, add: bool = False) -> None:
        """Set `key` (replacing its last value, or adding one more with add=True) and save."""
        if len(value) > 1 << 16 or any(c < " " and c not in "\t\n" for c in value):
            raise BadInput("a config value must be at most 64 KiB with no control characters but tab and newline")
        sec, sub, name = split_key(key)
        entries = self._scan()
        line = f"\t{name} = {_quote(value)}"
        same = [i for i, s, ss, k, _ in entries if (s, ss, k) == (sec, sub, name)]
        if same and not add:
            self.lines[same[-1]] = line
        else:
            at = self._section_end(sec, sub)
            if at is None:
                header = f'[{sec} "{_escape_sub(sub)}"]' if sub is not None else f"[{sec}]"
                self.lines += [header, line]
            else:
                self.lines.insert(at, line)
        self.save()

    def unset(self, key: str) -> int:
        """Remove every value of `key`; returns how many were removed."""
        sec, sub, name = split_key(key)
        doomed = {i for i, s, ss, k, _ in self._scan() if (s, ss, k) == (sec, sub, name)}
        self.lines = [line for i, line in enumerate(self.lines) if i not in doomed]
        if doomed:
            self.save()
        return len(doomed)

    def remove_section(self, section: str, sub: str | None = None) -> bool:
        out, skipping, found = [], False, False
        for line in self.lines:
            header = _header(line)
            if header is not None:
                skipping = header == (section.lower(), sub)
                found = found or skipping
            if not skipping:
                out.append(line)
        self.lines = out
        if found:
            self.save()
        return found

    def rename_section(self, section: str, old: str, new: str) -> bool:
        """`[section "old"]` becomes `[section "new"]` (every header of it), keys and comments kept."""
        found = False
        for i, line in enumerate(self.lines):
            if _header(line) == (section.lower(), old):
                self.lines[i] = f'[{section.lower()} "{_escape_sub(new)}"]'
                found = True
        if found:
            self.save()
        return found

    def _section_end(self, sec: str, sub: str | None) -> int | None:
        end, inside = None, False
        for i, line in enumerate(self.lines):
            header = _header(line)
            if header is not None:
                inside = header == (sec, sub)
                if inside:
                    end = i + 1
            elif inside and line.strip():
                end = i + 1
        return end

    def save(self) -> None:
        if self.path is not None and not self._batched:
            atomic_write(self.path, ("\n".join(self.lines) + "\n").encode("utf-8"))
