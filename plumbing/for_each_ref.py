"""`reel for-each-ref`: print refs through a git-style `%(atom)` format."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable

import click

from reelstore.cli.context import Context, pass_ctx
from reelstore.errors import BadInput
from reelstore.objects import Hash
from reelstore.storage.repo import Repo

DEFAULT_FORMAT = "%(objectname) %(objecttype)\t%(refname)"
_SHORT_PREFIXES = ("refs/heads/", "refs/views/", "refs/remotes/", "refs/drains/", "refs/")
_TOKEN = re.compile(r"%\(([a-z:]+)\)|%%|%([0-9a-fA-F]{2})|%")


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


Atom = Callable[[Repo, str, Hash], str]

ATOMS: dict[str, Atom] = {
    "refname": lambda repo, name, h: name,
    "refname:short": lambda repo, name, h: short_name(repo, name),
    "objectname": lambda repo, name, h: h.hex(),
    "objectname:short": lambda repo, name, h: h.short,
    "objecttype": lambda repo, name, h: repo.objects.get(h).kind,
    "objectsize": lambda repo, name, h: str(len(repo.objects.get(h).content())),
}


def compile_format(fmt: str) -> Callable[[Repo, str, Hash], str]:
    """Parse FMT once (E014 on an unknown atom) into a function of one ref."""
    parts: list[str | Atom] = []
    pos = 0
    for m in _TOKEN.finditer(fmt):
        parts.append(fmt[pos : m.start()])
        pos = m.end()
        if m.group(1):
            atom = ATOMS.get(m.group(1))
            if atom is None:
                raise BadInput(f"unknown format atom %({m.group(1)}); known: {', '.join(sorted(ATOMS))}")
            parts.append(atom)
        elif m.group(2):
            parts.append(chr(int(m.group(2), 16)))
        elif m.group(0) == "%%":
            parts.append("%")
        else:
            raise BadInput(f"format {fmt!r}: a lone % must be written %%")
    parts.append(fmt[pos:])

    def render(repo: Repo, name: str, h: Hash) -> str:
        return "".join(p if isinstance(p, str) else p(repo, name, h) for p in parts)

    return render


@click.command("for-each-ref")
@click.option("--format", "fmt", default=DEFAULT_FORMAT, show_default=True,
              help="%(refname), %(refname:short), %(objectname), %(objectname:short), %(objecttype), %(objectsize).")
@click.option("--count", type=click.IntRange(min=0), help="Stop after this many refs.")
@click.argument("patterns", nargs=-1)
@pass_ctx
def for_each_ref(ctx: Context, fmt: str, count: int | None, patterns: tuple[str, ...]) -> None:
    """Print each ref matching PATTERNS (a prefix such as refs/views, or a glob) through FMT."""
    repo = ctx.repo
    render = compile_format(fmt)
    refs = [(n, h) for n, h in repo.refs.list() if matches(patterns, n)][:count]
    if ctx.json:
        docs = []
        for name, h in refs:
            obj = repo.objects.get(h)
            docs.append({"ref": name, "short": short_name(repo, name), "id": h.hex(), "kind": obj.kind})
        ctx.emit(docs)
        return
    for name, h in refs:
        click.echo(render(repo, name, h))


COMMANDS = [for_each_ref]
