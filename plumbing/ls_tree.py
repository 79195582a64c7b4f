"""`reel ls-tree`: one node of a namespace map, or (with -r) every name in it."""

from __future__ import annotations

import click

from reelstore import revisions
from reelstore.cli.context import Context, pass_ctx
from reelstore.errors import BadInput
from reelstore.objects import Hash, Record, Tree, View
from reelstore.storage.repo import Repo


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
@click.argument("obj")
@pass_ctx
def ls_tree(ctx: Context, recursive: bool, obj: str) -> None:
    """List OBJ (a tree, or a record or view: its namespace root) as `NAME ID` lines. Without -r, an
    inner node (level > 0) lists its children: each child's first name and its node id."""
    repo = ctx.repo
    root = namespace_root(repo, obj)
    rows = leaves(repo, root) if recursive else list(root.entries)
    doc = {"id": root.id.hex(), "level": 0 if recursive else root.level,
           "entries": [{"name": n, "id": h.hex()} for n, h in rows]}
    ctx.emit(doc, "\n".join(f"{n} {h.hex()}" for n, h in rows))


COMMANDS = [ls_tree]
