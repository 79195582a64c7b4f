"""`reel cat-file`: show an object's kind, size or content; batch modes as git's."""

from __future__ import annotations

import json
import sys

import click

from reelstore.errors import BadInput, NotFound
from reelstore.objects import Blob, Hash, Object
from reelstore.objects.hash import is_full_hex, is_prefix
from reelstore.repo import Repo

from .context import Context, pass_ctx, write_bytes


def pretty(obj: Object) -> bytes:
    """What `cat-file -p` prints: a blob's bytes, any other kind as indented JSON."""
    if isinstance(obj, Blob):
        return obj.data
    return (json.dumps(obj.to_json(), indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")


def _lookup(repo: Repo, name: str) -> tuple[Hash | None, str]:
    """(id, "") or (None, "missing" | "ambiguous") for one batch line."""
    try:
        if is_full_hex(name):
            return Hash.from_hex(name), ""
        return repo.resolve(name), ""
    except NotFound:
        return None, "missing"
    except BadInput:
        return None, "ambiguous" if is_prefix(name) else "missing"


def _batch(ctx: Context, names: list[str] | None, with_content: bool, buffered: bool) -> None:
    repo = ctx.repo
    out = sys.stdout.buffer
    docs = []
    source = names if names is not None else (line.decode("utf-8", "replace").strip() for line in sys.stdin.buffer)
    for name in source:
        if not name:
            continue
        h, problem = _lookup(repo, name)
        obj = None
        if h is not None:
            try:
                obj = repo.objects.get(h)
            except NotFound:
                problem = "missing"
        if obj is None:
            if ctx.json:
                docs.append({"name": name, "missing" if problem == "missing" else "error": True})
            else:
                out.write(f"{name} {problem}\n".encode())
        else:
            content = obj.content()
            if ctx.json:
                doc = {"id": obj.id.hex(), "kind": obj.kind, "size": len(content)}
                if with_content:
                    doc["object"] = obj.to_json()
                docs.append(doc)
            else:
                out.write(f"{obj.id.hex()} {obj.kind} {len(content)}\n".encode())
                if with_content:
                    out.write(content + b"\n")
        if not buffered and not ctx.json:
            out.flush()
    if ctx.json:
        ctx.emit(docs)
    out.flush()


@click.command("cat-file")
@click.option("-t", "show", flag_value="type", help="Print the object's kind.")
@click.option("-s", "show", flag_value="size", help="Print the object's content size.")
@click.option("-p", "show", flag_value="pretty", help="Pretty-print the content.")
@click.option("-e", "show", flag_value="exists", help="Exit 0 if the object exists and is sound, 4 if missing.")
@click.option("--batch", "batch", flag_value="batch", help="For each name on stdin: '<id> <kind> <size>' and content.")
@click.option("--batch-check", "batch", flag_value="check", help="For each name on stdin: '<id> <kind> <size>'.")
@click.option("--batch-all-objects", is_flag=True, help="With --batch/--batch-check: every object, not stdin.")
@click.option("--buffer", is_flag=True, help="Do not flush after each batch entry.")
@click.argument("name", required=False)
@pass_ctx
def cat_file(ctx: Context, show: str | None, batch: str | None, batch_all_objects: bool, buffer: bool,
             name: str | None) -> None:
    """Show object NAME (an id, a unique prefix of 4+ hex digits, or a ref)."""
    if batch:
        if show or name:
            raise click.UsageError("--batch and --batch-check take names on stdin, not -t/-s/-p/-e or NAME")
        names = sorted(h.hex() for h in ctx.repo.objects) if batch_all_objects else None
        _batch(ctx, names, batch == "batch", buffer)
        return
    if batch_all_objects:
        raise click.UsageError("--batch-all-objects needs --batch or --batch-check")
    if not show or not name:
        raise click.UsageError("give one of -t, -s, -p, -e and an object NAME")
    repo = ctx.repo
    if show == "exists":
        try:
            repo.objects.get(repo.resolve(name))
        except NotFound:
            click.get_current_context().exit(NotFound.exit_status)
        return
    obj = repo.objects.get(repo.resolve(name))
    if show == "type":
        ctx.emit({"id": obj.id.hex(), "kind": obj.kind}, obj.kind)
    elif show == "size":
        size = len(obj.content())
        ctx.emit({"id": obj.id.hex(), "size": size}, str(size))
    elif ctx.json:
        ctx.emit({"id": obj.id.hex(), "kind": obj.kind, "object": obj.to_json()})
    else:
        write_bytes(pretty(obj))


COMMANDS = [cat_file]
