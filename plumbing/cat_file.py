"""`reel cat-file`: show an object's kind, size or content; batch modes as git's."""

from __future__ import annotations

import json
import sys

import click

from reelstore import revisions
from reelstore.cli.context import Context, pass_ctx, write_bytes
from reelstore.errors import BadInput, NotFound, StorageError
from reelstore.objects import Blob, Hash, Object
from reelstore.objects.block import peek
from reelstore.objects.hash import is_full_hex, is_prefix
from reelstore.storage.repo import Repo


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
        return revisions.resolve(repo, name), ""
    except NotFound:
        return None, "missing"
    except BadInput:
        return None, "ambiguous" if is_prefix(name) else "missing"


def _entry(repo: Repo, name: str, with_content: bool, as_json: bool) -> bytes | dict:
    """One batch answer: git's `<id> <kind> <size>` line (and content), or its JSON form."""
    h, problem = _lookup(repo, name)
    raw = None
    if h is not None:
        try:
            raw = repo.objects.get_raw(h)
        except NotFound:
            problem = "missing"
    if h is None or raw is None:
        if as_json:
            return {"name": name, "missing" if problem == "missing" else "error": True}
        return f"{name} {problem}\n".encode()
    try:
        kind, content = peek(raw)
    except BadInput as err:
        raise StorageError(f"object {h.hex()} is damaged: {err.message}", id=h) from None
    if as_json:
        doc: dict = {"id": h.hex(), "kind": kind, "size": len(content)}
        if with_content:
            doc["object"] = repo.objects.get(h).to_json()
        return doc
    head = f"{h.hex()} {kind} {len(content)}\n".encode()
    return head + content + b"\n" if with_content else head


def _batch(ctx: Context, names: list[str] | None, with_content: bool, buffered: bool) -> None:
    """Objects are read as re-hashed bytes, not decoded: the batch prints kind, size and raw content."""
    repo = ctx.repo
    out = sys.stdout.buffer
    docs = []
    source = names if names is not None else (line.decode("utf-8", "replace").strip() for line in sys.stdin.buffer)
    for name in source:
        if not name:
            continue
        answer = _entry(repo, name, with_content, ctx.json)
        if isinstance(answer, dict):
            docs.append(answer)
            continue
        out.write(answer)
        if not buffered:
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
            repo.objects.get(revisions.resolve(repo, name))
        except NotFound:
            click.get_current_context().exit(NotFound.exit_status)
        return
    obj = repo.objects.get(revisions.resolve(repo, name))
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
