"""`reel for-each-ref`: print refs through a git-style `%(atom)` format, sorted and filtered as git's."""

from __future__ import annotations

import fnmatch
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import click

from reelstore import revisions
from reelstore.backend.repo import Repo
from reelstore.cli import formats
from reelstore.cli.complete import REFS, REVISIONS
from reelstore.cli.context import Context, pass_ctx
from reelstore.kernel.history import MAX_LIMIT
from reelstore.objects import Hash, Object

DEFAULT_FORMAT = "%(objectname) %(objecttype)\t%(refname)"
_SHORT_PREFIXES = ("refs/heads/", "refs/views/", "refs/remotes/", "refs/drains/", "refs/tags/", "refs/")


def short_name(repo: Repo, name: str) -> str:
    """The shortest name that still finds this ref when searched as git does, else the full name."""
    best = name
    for prefix in _SHORT_PREFIXES:
        if name.startswith(prefix):
            short = name[len(prefix) :]
            if len(short) < len(best) and repo.ref_name(short) == name:
                best = short
    return best


def matches(patterns: tuple[str, ...], name: str) -> bool:
    """git's rule: a pattern matches a name it is a `/`-bounded prefix of, or as a glob."""
    if not patterns:
        return True
    for p in patterns:
        if any(c in p for c in "*?["):
            if fnmatch.fnmatchcase(name, p):
                return True
        elif name == p or name.startswith(p.rstrip("/") + "/"):
            return True
    return False


@dataclass
class RefItem:
    """One ref as the atoms see it; its object is read (and verified) only if an atom needs it."""

    repo: Repo = field(repr=False)
    name: str
    id: Hash

    @cached_property
    def obj(self) -> Object:
        return self.repo.objects.get(self.id)


ATOMS: dict[str, formats.AtomFactory[RefItem]] = {
    "refname": formats.ref_name(lambda r: r.name, lambda r: short_name(r.repo, r.name), "refname"),
    "objectname": formats.hex_id(lambda r: r.id.hex(), "objectname"),
    "objecttype": formats.plain(lambda r: r.obj.kind, "objecttype"),
    "objectsize": formats.plain(lambda r: str(len(r.obj.content())), "objectsize"),
}


def sort_key(spec: str) -> tuple[Callable[[RefItem], Any], bool]:
    """A `--sort` KEY (an atom with its modifier, `-` in front to reverse) as (key function, reverse)."""
    reverse = spec.startswith("-")
    atom = spec[1:] if reverse else spec
    render = formats.Format(f"%({atom})", ATOMS).render
    if atom == "objectsize":
        return (lambda r: int(render(r))), reverse
    return render, reverse


@click.command("for-each-ref")
@click.option(
    "--format",
    "fmt",
    default=DEFAULT_FORMAT,
    show_default=True,
    help="Atoms: %(refname) [:short, :lstrip=N, :rstrip=N], %(objectname) [:short, :short=N], "
    "%(objecttype), %(objectsize).",
)
@click.option(
    "--sort",
    "sorts",
    multiple=True,
    metavar="KEY",
    help="Sort by an atom (e.g. refname, -objectsize); repeatable, the last is the primary key.",
)
@click.option("--count", type=click.IntRange(0, MAX_LIMIT), help="Stop after this many refs.")
@click.option(
    "--points-at", "points_at", metavar="OBJECT", shell_complete=REVISIONS, help="Only refs whose value is OBJECT."
)
@click.argument("patterns", nargs=-1, shell_complete=REFS)
@pass_ctx
def for_each_ref(
    ctx: Context, fmt: str, sorts: tuple[str, ...], count: int | None, points_at: str | None, patterns: tuple[str, ...]
) -> None:
    """Print each ref matching PATTERNS (a prefix such as refs/views, or a glob) through FMT."""
    repo = ctx.repo
    render = formats.Format(fmt, ATOMS).render
    keys = [sort_key(s) for s in sorts]
    target = revisions.resolve(repo, points_at) if points_at is not None else None
    refs = [
        RefItem(repo, n, h) for n, h in repo.refs.list() if matches(patterns, n) and (target is None or h == target)
    ]
    for key, reverse in keys:
        refs.sort(key=key, reverse=reverse)
    refs = refs[:count]
    if ctx.json:
        ctx.emit(
            [{"ref": r.name, "short": short_name(repo, r.name), "id": r.id.hex(), "kind": r.obj.kind} for r in refs]
        )
        return
    for r in refs:
        click.echo(render(r))


COMMANDS = [for_each_ref]
