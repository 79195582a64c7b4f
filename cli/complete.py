"""Dynamic shell completion: the view, trunk, ref, remote, snapshot and operation names an argument
takes, read from the store the command line names (`-C DIR`, `REEL_DIR`, or the one around the cwd).

click's own machinery runs them (`_REEL_COMPLETE=bash_source reel`, docs/completion.md); a parameter
opts in with `shell_complete=VIEWS` and so on. A completer reads the store and never writes it, and
outside a store, or in one it cannot read, it offers nothing: a traceback in the middle of the user's
command line would be worse than no suggestion. Store code is imported only when a completer runs,
so a command module that uses these costs nothing more to import.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:  # click's completion module loads only when a completer runs, as the store does
    from click.shell_completion import CompletionItem

    from reelstore.backend.repo import Repo

Completer = Callable[[click.Context, click.Parameter, str], "list[CompletionItem]"]

_SHORT = (
    ("refs/heads/", "trunk"),
    ("refs/views/", "view"),
    ("refs/tags/", "tag"),
    ("refs/remotes/", "remote-tracking ref"),
    ("refs/snapshots/", "snapshot"),
)
"""Prefixes whose names a revision may give short (reelstore.revisions searches these and more)."""
_LIMIT = 2000
"""At most this many suggestions: a shell is no place for a store's every ref."""


def _repo(ctx: click.Context) -> Repo:
    from reelstore.backend.repo import Repo

    directory = ctx.find_root().params.get("directory")
    return Repo.discover(Path(directory) if directory else None)


def _guarded(names: Callable[[Repo, str], Iterable[tuple[str, str]]]) -> Completer:
    """A completer offering `names(repo, incomplete)` (name, help) that start with `incomplete`;
    nothing at all if the store cannot be found or read, whatever the reason."""

    def complete(ctx: click.Context, _param: click.Parameter, incomplete: str) -> list[CompletionItem]:
        from click.shell_completion import CompletionItem

        try:
            found = [
                CompletionItem(name, help=help or None)
                for name, help in names(_repo(ctx), incomplete)
                if name.startswith(incomplete)
            ]
        except Exception:  # completion must never raise into the user's shell
            return []
        return found[:_LIMIT]

    return complete


def _under(repo: Repo, prefix: str) -> list[str]:
    return [ref[len(prefix) :] for ref, _ in repo.refs.list(prefix)]


def _views(repo: Repo, _incomplete: str) -> list[tuple[str, str]]:
    return [(name, "view") for name in _under(repo, "refs/views/")]


def _trunks(repo: Repo, _incomplete: str) -> list[tuple[str, str]]:
    return [(name, "trunk") for name in _under(repo, "refs/heads/")]


def _snapshots(repo: Repo, _incomplete: str) -> list[tuple[str, str]]:
    return [(name, "snapshot") for name in _under(repo, "refs/snapshots/")]


def _remotes(repo: Repo, _incomplete: str) -> list[tuple[str, str]]:
    return [(name, repo.config.get(f"remote.{name}.url") or "") for name in repo.config.subsections("remote")]


def _sources(repo: Repo, incomplete: str) -> list[tuple[str, str]]:
    """A trunk or a view, by name or by full ref (what `fork --from`, `ls` and `diff` take)."""
    if incomplete.startswith("refs/"):
        return [(ref, "") for prefix in ("refs/heads/", "refs/views/") for ref, _ in repo.refs.list(prefix)]
    return [*_trunks(repo, incomplete), *_views(repo, incomplete)]


def _full_refs(repo: Repo, _incomplete: str) -> list[tuple[str, str]]:
    return [(ref, "") for ref, _ in repo.refs.list("refs/")]


def _revisions(repo: Repo, incomplete: str) -> list[tuple[str, str]]:
    """Ref names, short or full, also after a range's `..`/`...` or a leading `^` (docs/revisions.md)."""
    head, rest = "", incomplete
    for sep in ("...", ".."):
        if sep in incomplete:
            cut = incomplete.rindex(sep) + len(sep)
            head, rest = incomplete[:cut], incomplete[cut:]
            break
    else:
        if incomplete.startswith("^"):
            head, rest = "^", incomplete[1:]
    if rest.startswith("refs/"):
        names = _full_refs(repo, rest)
    else:
        names = [(ref[len(prefix) :], kind) for prefix, kind in _SHORT for ref, _ in repo.refs.list(prefix)]
    return [(head + name, kind) for name, kind in names]


def _ops(repo: Repo, incomplete: str) -> list[tuple[str, str]]:
    from reelstore.drain.ops import list_ops

    full = incomplete.startswith("op_") or "op_".startswith(incomplete)  # an id is taken without its op_ too
    return [(o.op if full else o.op.removeprefix("op_"), f"{o.state} {o.effect.resource}") for o in list_ops(repo)]


VIEWS = _guarded(_views)
"""Live view names."""
TRUNKS = _guarded(_trunks)
"""Trunk names."""
SOURCES = _guarded(_sources)
"""Trunks and views, by name or full ref."""
SNAPSHOTS = _guarded(_snapshots)
"""Snapshot names."""
REMOTES = _guarded(_remotes)
"""Configured remote names (their URL as the description)."""
REFS = _guarded(_full_refs)
"""Full ref names (`refs/…`), for commands that want exactly those."""
REVISIONS = _guarded(_revisions)
"""Anything a revision starts with: short or full ref names, after `^` or a range's `..` too."""
OPS = _guarded(_ops)
"""Operation ids (with their state and resource as the description)."""
