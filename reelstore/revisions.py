"""git's revision syntax over a store: `NAME~N`, `NAME^`, `NAME@{N}`, `NAME:PATH`, `A..B`, `^A`, `A...B`.

One parser and one resolver, so every command that takes an object name understands the same
syntax. A name's history follows the same chains as `rev-list` (records by parent, journal entries
by prev, views by base); `@{N}` reads the ref's reflog; `:PATH` looks a name up in the namespace of
a record, view or tree. The history walker and the namespace load only for a name that uses them, so
resolving a plain id or ref name (cat-file -p, update-ref) stays cheap at start-up.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from reelstore.errors import BadInput, NotFound
from reelstore.objects import Hash
from reelstore.wording import plural

if TYPE_CHECKING:
    from reelstore.backend.repo import Repo
    from reelstore.objects import Object

_STEP = re.compile(r"~(\d*)|\^(\d*)")
_REFLOG = re.compile(r"^(.*)@\{(-?\d+)\}")


@dataclass(frozen=True, slots=True)
class Rev:
    """One parsed revision: a base name, an optional reflog index, ancestor steps, an optional path."""

    name: str
    reflog: int | None = None
    back: tuple[int, ...] = ()
    """Generations to walk back, one number per `~N` / `^` step (`^0` is 0: the object itself)."""
    path: str | None = None


def parse(text: str) -> Rev:
    """Split `text` into its parts (E014 on malformed syntax or a range: use `parse_range`)."""
    if ".." in text.partition(":")[0]:
        raise BadInput(f"{text!r} is a range (A..B); this command takes one object")
    spec, colon, path = text.partition(":")
    if colon and not path:
        raise BadInput(f"{text!r}: give a path after ':'")
    reflog = None
    m = _REFLOG.match(spec)
    if m:
        if int(m.group(2)) < 0:
            raise BadInput(f"{text!r}: @{{-N}} (previous branch) has no meaning here")
        reflog = int(m.group(2))
        rest = spec[m.end() :]
        spec = m.group(1)
    else:
        cut = min((i for i in (spec.find("~"), spec.find("^")) if i >= 0), default=len(spec))
        spec, rest = spec[:cut], spec[cut:]
    back: list[int] = []
    pos = 0
    for step in _STEP.finditer(rest):
        if step.start() != pos:
            break
        pos = step.end()
        tilde, caret = step.group(1), step.group(2)
        if tilde is not None and step.group(0).startswith("~"):
            back.append(int(tilde) if tilde else 1)
        else:
            n = int(caret) if caret else 1
            if n > 1:
                raise BadInput(f"{text!r}: ^{n} names a parent this store's single-parent history lacks")
            back.append(n)
    if pos != len(rest):
        raise BadInput(f"{text!r}: cannot read {rest[pos:]!r} (want ~N, ^, ^0, @{{N}} or :PATH)")
    if not spec and reflog is None and not back:
        raise BadInput(f"{text!r} names nothing" if text else "an empty name names nothing")
    return Rev(spec or "@", reflog, tuple(back), path if colon else None)


def parse_range(text: str) -> tuple[str, str] | None:
    """`A..B` as (A, B), an empty side meaning `@` (the trunk's head); None if `text` is no range."""
    spec = text.partition(":")[0]
    if "..." in spec:
        raise BadInput(f"{text!r}: symmetric ranges (A...B) are not supported")
    if ".." not in spec:
        return None
    a, _, b = text.partition("..")
    return a or "@", b or "@"


def resolve(repo: Repo, text: str) -> Hash:
    """The object `text` names (E001 if it names nothing, E014 if it cannot be read)."""
    rev = parse(text)
    h = _base(repo, rev)
    if rev.back:
        h = _walk_back(repo, h, rev.back, text)
    if rev.path is not None:
        h = lookup(repo, h, rev.path, text)
    return h


def _walk_back(repo: Repo, h: Hash, back: tuple[int, ...], text: str) -> Hash:
    """`h` after the `~N` / `^` steps of `back`."""
    from reelstore.maintenance.reach import predecessor

    for n in back:
        for _ in range(n):
            prev = predecessor(repo.objects.get(h))
            if prev is None:
                raise NotFound(f"{text!r}: {h.short} has no parent", id=h)
            h = prev
    return h


def lookup(repo: Repo, h: Hash, path: str, text: str = "") -> Hash:
    """The value of `path` in the namespace of the record, view or tree `h` (E001 if absent)."""
    from reelstore.namespace.tree import Namespace
    from reelstore.objects import Record, Tree, View

    obj: Object = repo.objects.get(h)
    if isinstance(obj, (Record, View)):
        root = obj.namespace
    elif isinstance(obj, Tree):
        root = obj.id
    else:
        raise BadInput(f"{text or h.short!r}: a {obj.kind} has no names; ':PATH' needs a record, view or tree")
    found = Namespace(repo.objects).get(root, path)
    if found is None:
        raise NotFound(f"{path!r} is not in {text.partition(':')[0] or h.short}", name=path)
    return found


def in_range(repo: Repo, text: str) -> Iterator[Object]:
    """`A..B`: the history of B, newest first, without anything A's history holds; one name: its history."""
    return listed(repo, [text])


def select(repo: Repo, args: Sequence[str]) -> tuple[list[tuple[str, Hash]], set[Hash]]:
    """git's revision-list arguments: `B` (its history), `^A` (without A's history), `A..B` (`^A B`) and
    `A...B` (what either history holds and not both). Returns the tips to walk, each with the text
    naming it, and the ids to leave out."""
    from reelstore.maintenance.reach import history

    tips: list[tuple[str, Hash]] = []
    excluded: list[Hash] = []
    hidden: set[Hash] = set()
    for text in args:
        spec = text.partition(":")[0]
        if "..." in spec:
            a, _, b = text.partition("...")
            pair = [(a or "@", resolve(repo, a or "@")), (b or "@", resolve(repo, b or "@"))]
            tips += pair
            both = [{obj.id for obj in history(repo.objects, [h])} for _, h in pair]
            hidden |= both[0] & both[1]
            continue
        two = parse_range(text)
        if two is not None:
            excluded.append(resolve(repo, two[0]))
            tips.append((two[1], resolve(repo, two[1])))
        elif text.startswith("^") and len(text) > 1:
            excluded.append(resolve(repo, text[1:]))
        else:
            tips.append((text, resolve(repo, text)))
    hidden |= {obj.id for obj in history(repo.objects, excluded)}
    return tips, hidden


def listed(repo: Repo, args: Sequence[str]) -> Iterator[Object]:
    """The objects the revision list `args` selects (see `select`), newest first along each chain."""
    return selected(repo, *select(repo, args))


def selected(repo: Repo, tips: Sequence[tuple[str, Hash]], hidden: set[Hash]) -> Iterator[Object]:
    """The history of `tips`, newest first along each chain, without the `hidden` ids (from `select`)."""
    from reelstore.maintenance.reach import history

    for obj in history(repo.objects, [h for _, h in tips]):
        if obj.id not in hidden:
            yield obj


def trunk_of(repo: Repo, text: str) -> str | None:
    """The trunk a revision's base names (`main~2` → main, `@` → the store's trunk), if it names one."""
    name = parse(text).name
    if name == "@":
        return repo.trunk
    full = repo.ref_name(name)
    return full[len("refs/heads/") :] if full is not None and full.startswith("refs/heads/") else None


def _base(repo: Repo, rev: Rev) -> Hash:
    """The object the name (and its reflog index) designates, before any ancestor step."""
    name = rev.name
    if rev.reflog is None:
        if name == "@":
            return repo.refs[f"refs/heads/{repo.trunk}"]
        return repo.resolve(name)
    full = f"refs/heads/{repo.trunk}" if name == "@" else repo.ref_name(name)
    if full is None:
        raise NotFound(f"{name!r} is not a ref, so it has no reflog")
    entries = repo.refs.reflog(full)
    if rev.reflog == 0 and not entries:
        return repo.refs[full]
    if rev.reflog >= len(entries):
        count = len(entries)
        raise NotFound(f"{full} has only {plural(count, 'reflog entry')}", ref=full)
    value = entries[len(entries) - 1 - rev.reflog].new
    if value is None:
        raise NotFound(f"{full}@{{{rev.reflog}}} records a deletion", ref=full)
    return value
