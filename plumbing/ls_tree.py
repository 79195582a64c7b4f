"""`reel ls-tree`: one node of a namespace map, or (with -r) every name in it, in git's line format."""

from __future__ import annotations

import click

from reelstore import revisions
from reelstore.backend.repo import Repo
from reelstore.cli.complete import REVISIONS
from reelstore.cli.context import Context, pass_ctx
from reelstore.cli.quoting import quote_path
from reelstore.errors import BadInput
from reelstore.objects import Hash, Record, Tree, View

BLOB_MODE, TREE_MODE = "100644", "040000"


def namespace_root(repo: Repo, name: str) -> Tree:
    """The tree NAME designates: a tree itself, or the namespace root of a record or view (E014 otherwise)."""
    obj = repo.objects.get(revisions.resolve(repo, name))
    if isinstance(obj, (Record, View)):
        obj = repo.objects.get(obj.namespace)
    if not isinstance(obj, Tree):
        raise BadInput(f"{name} is a {obj.kind}, not a tree, record or view")
    return obj


def leaves(repo: Repo, root: Tree) -> list[tuple[str, Hash]]:
    """Every (name, value id) of the map under `root`, in name order; iterative, any depth."""
    out: list[tuple[str, Hash]] = []
    stack: list[Tree] = [root]
    while stack:
        node = stack.pop()
        if node.level == 0:
            out.extend(node.entries)
            continue
        children = []
        for _, h in node.entries:
            child = repo.objects.get(h)
            if not isinstance(child, Tree) or child.level >= node.level:
                raise BadInput(f"tree {node.id.hex()} has a child {h.hex()} that is not a lower tree node")
            children.append(child)
        stack.extend(reversed(children))
    return out


@click.command("ls-tree")
@click.option("-r", "recursive", is_flag=True, help="Walk down to the leaves and list every name.")
@click.option("-z", "nul", is_flag=True, help="End each entry with NUL instead of newline; names unquoted.")
@click.option("--name-only", is_flag=True, help="Print only the names.")
@click.argument("obj", shell_complete=REVISIONS)
@pass_ctx
def ls_tree(ctx: Context, recursive: bool, nul: bool, name_only: bool, obj: str) -> None:
    """List OBJ (a tree, or a record or view: its namespace root) as git's `MODE TYPE ID<TAB>NAME` lines.
    A name's value is a blob (100644); without -r, an inner node (level > 0) lists its children as
    trees (040000): each child's first name and its node id. Names holding a control character, `"`
    or `\\` (and, with core.quotePath true, non-ASCII) are quoted as git quotes them, except with -z."""
    repo = ctx.repo
    root = namespace_root(repo, obj)
    rows = leaves(repo, root) if recursive else list(root.entries)
    level = 0 if recursive else root.level
    if ctx.json:
        ctx.emit({"id": root.id.hex(), "level": level, "entries": [{"name": n, "id": h.hex()} for n, h in rows]})
        return
    mode, kind = (BLOB_MODE, "blob") if level == 0 else (TREE_MODE, "tree")
    fully = repo.config.get_bool("core.quotePath", True)
    end = "\0" if nul else "\n"
    out = []
    for name, h in rows:
        shown = name if nul else quote_path(name, fully)
        out.append(shown + end if name_only else f"{mode} {kind} {h.hex()}\t{shown}{end}")
    click.echo("".join(out), nl=False)


COMMANDS = [ls_tree]
