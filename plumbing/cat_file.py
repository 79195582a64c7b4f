"""`reel cat-file`: show an object's kind, size or content; batch modes as git's."""

from __future__ import annotations

import gc
import io
import itertools
import re
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, BinaryIO

import click

from reelstore.cli.complete import REVISIONS
from reelstore.cli.context import Context, every_byte, json_text, pass_ctx, write_bytes
from reelstore.errors import BadInput, NotFound
from reelstore.objects.hash import Hash, is_full_hex, is_prefix

if TYPE_CHECKING:  # the batch modes' own machinery loads when a batch runs: -p, -t, -s and -e never use it
    from reelstore.backend.packs.bulk_read import BulkReader
    from reelstore.backend.repo import Repo
    from reelstore.cli import formats
    from reelstore.objects import Object


def pretty(obj: Object) -> bytes:
    """What `cat-file -p` prints: a blob's bytes, any other kind as the command line's indented JSON."""
    if obj.kind == "blob":  # a blob's content is its data (asking by kind loads no blob class for a record)
        return obj.content()
    return (json_text(obj.to_json()) + "\n").encode("utf-8")


def _lookup(repo: Repo, name: str) -> tuple[Hash | None, str]:
    """(id, "") or (None, "missing" | "ambiguous") for one batch line."""
    from reelstore import revisions

    try:
        if is_full_hex(name):
            return Hash.from_hex(name), ""
        return revisions.resolve(repo, name), ""
    except NotFound:
        return None, "missing"
    except BadInput:
        return None, "ambiguous" if is_prefix(name) else "missing"


DEFAULT_FORMAT = "%(objectname) %(objecttype) %(objectsize)"
_HEX_DIGITS = b"0123456789abcdef"


class Found:
    """One object a batch line named, as the format atoms see it."""

    __slots__ = ("id", "kind", "size", "rest")

    def __init__(self, id: Hash, kind: str, size: int, rest: str) -> None:
        self.id, self.kind, self.size, self.rest = id, kind, size, rest


def batch_format(spec: str) -> formats.Format[Found]:
    """SPEC compiled with the batch modes' atoms (E014 for an unknown atom or modifier)."""
    from reelstore.cli import formats

    atoms: dict[str, formats.AtomFactory[Found]] = {
        "objectname": formats.hex_id(lambda f: f.id.hex(), "objectname"),
        "objecttype": formats.plain(lambda f: f.kind, "objecttype"),
        "objectsize": formats.plain(lambda f: str(f.size), "objectsize"),
        "rest": formats.plain(lambda f: f.rest, "rest"),
    }
    return formats.Format(spec, atoms, hex_escapes=False)


def _entry(
    repo: Repo, reader: BulkReader, line: str, fmt: formats.Format[Found], with_content: bool, as_json: bool
) -> list[bytes | memoryview] | dict[str, Any]:
    """One batch answer: FMT's line (and the content), or its JSON form. With %(rest) in FMT the
    name ends at the first whitespace and the remainder is echoed, as git does."""
    name, rest = line, ""
    if "rest" in fmt.atoms:
        m = re.match(r"(\S*)\s*(.*)", line, re.DOTALL)
        assert m is not None
        name, rest = m.group(1), m.group(2)
    h, problem = _lookup(repo, name)
    found = reader.read(h) if h is not None else None
    if h is None or found is None:
        if as_json:
            return {"name": name, "missing" if problem in ("missing", "") else "error": True}
        return [f"{name} {problem or 'missing'}\n".encode()]
    kind, content = found
    if as_json:
        doc: dict[str, Any] = {"id": h.hex(), "kind": kind, "size": len(content)}
        if with_content:
            doc["object"] = repo.objects.get(h).to_json()
        return doc
    head = (fmt.render(Found(h, kind, len(content), rest)) + "\n").encode()
    return [head, content, b"\n"] if with_content else [head]


def _runs(sep: bytes) -> Iterator[bytes]:
    """Stdin in runs of whole records, each ending with `sep`, one run per read (so the command can be
    driven one name at a time, and answers are flushed before each read that may wait); a last record
    without its separator still counts (it is given one), an empty remainder does not."""
    stream = sys.stdin.buffer
    pending = b""
    read = stream.read1 if isinstance(stream, io.BufferedIOBase) else stream.read  # read1: no waiting for a full chunk
    while chunk := read(65536):
        data = pending + chunk
        end = data.rfind(sep) + 1
        pending = data[end:]
        yield data[:end]
    if pending:
        yield pending + sep


DIRECT = 4096
"""Contents this long are written straight out, not gathered with the chunk's other answers (so what a
chunk holds in memory stays small whatever the objects' sizes)."""


def _batch(
    ctx: Context, names: list[bytes] | None, fmt: formats.Format[Found], with_content: bool, buffered: bool, sep: bytes
) -> None:
    """Objects are read as re-hashed bytes, not decoded: the batch prints kind, size and raw content.
    Under the default format, a full lowercase hex id that the store's packs hold takes the short way:
    in C when the accelerator is on (`BulkReader.answer`), else one probe of the reader's map per pack,
    echoed as given (still hashed once); a full id kept elsewhere is parsed once and read through the
    store. The answers to one chunk of input are written together."""
    from binascii import unhexlify

    from reelstore.backend.packs.bulk_read import BulkReader

    out = sys.stdout.buffer
    if _own_process(out):
        # What exists now lives until the process ends, so it is frozen: no collection walks it again, and
        # the exit skips collecting it.
        gc.freeze()
    repo = ctx.repo
    reader = BulkReader.of_repo(repo)
    write = every_byte(out)
    docs = []
    fast = fmt.spec == DEFAULT_FORMAT and not ctx.json
    accelerated = fast and reader.accelerated

    def answer(records: list[bytes], buf: bytearray) -> None:
        """Answer `records` in Python, in order, into `buf` (or straight out, for large contents)."""
        for record, found in zip(records, reader.read_names(records) if fast else itertools.repeat(None)):
            if found is None and fast and len(record) == 64 and not record.translate(None, _HEX_DIGITS):
                got = reader.read(unhexlify(record))
                if got is None:
                    buf += record + b" missing\n"
                    continue
                found = got[0].encode("ascii"), got[1]
            if found is not None:
                kind, content = found
                buf += b"%s %s %d\n" % (record, kind, len(content))
                if with_content:
                    if len(content) >= DIRECT:
                        write(buf)
                        buf.clear()
                        write(content)
                    else:
                        buf += content
                    buf += b"\n"
                continue
            entry = _entry(repo, reader, record.decode("utf-8", "replace"), fmt, with_content, ctx.json)
            if isinstance(entry, dict):
                docs.append(entry)
            else:
                for piece in entry:
                    buf += piece

    for run in _listed(names) if names is not None else _runs(sep):
        buf = bytearray()
        try:
            if accelerated:
                # The accelerator answers names until one it leaves (not a stored packed entry, or one
                # failing a check); that one is answered here, which reads it the general way or names the
                # damage, and the accelerator goes on after it.
                at = 0
                while (at := reader.answer(run, at, sep, buf, with_content, DIRECT)) < len(run):
                    end = run.index(sep, at)
                    answer([run[at:end]], buf)
                    at = end + 1
            else:
                answer(run.split(sep)[:-1], buf)
        finally:  # what was answered before a damaged object is still printed
            write(buf)
        if not buffered:
            out.flush()
    if ctx.json:
        ctx.emit(docs)
    out.flush()


def _own_process(out: BinaryIO) -> bool:
    """Whether this command is a process of its own: its stdout is a real file, not the in-memory capture
    of a caller or test runner (whose process goes on, so its objects must not be frozen)."""
    try:
        out.fileno()
    except (AttributeError, OSError, ValueError):
        return False
    return True


def _listed(names: list[bytes]) -> Iterator[bytes]:
    """`--batch-all-objects`' ids as runs of 1,024 newline-ended records, as stdin's are read."""
    for at in range(0, len(names), 1024):
        yield b"\n".join(names[at : at + 1024]) + b"\n"


@click.command("cat-file")
@click.option("-t", "show_type", is_flag=True, help="Print the object's kind.")
@click.option("-s", "show_size", is_flag=True, help="Print the object's content size.")
@click.option("-p", "show_pretty", is_flag=True, help="Pretty-print the content.")
@click.option("-e", "show_exists", is_flag=True, help="Exit 0 if the object exists and is sound, 4 if missing.")
@click.option(
    "--batch",
    "batch",
    is_flag=False,
    flag_value=DEFAULT_FORMAT,
    metavar="[=FORMAT]",
    help="For each name on stdin: FORMAT's line (default '<id> <kind> <size>') and the content.",
)
@click.option(
    "--batch-check",
    "batch_check",
    is_flag=False,
    flag_value=DEFAULT_FORMAT,
    metavar="[=FORMAT]",
    help="For each name on stdin: FORMAT's line (default '<id> <kind> <size>').",
)
@click.option("--batch-all-objects", is_flag=True, help="With --batch/--batch-check: every object, not stdin.")
@click.option("--buffer", is_flag=True, help="Do not flush after each batch entry.")
@click.option("-z", "nul", is_flag=True, help="Batch input names are separated by NUL, not newline.")
@click.argument("args", nargs=-1, shell_complete=REVISIONS)
@pass_ctx
def cat_file(
    ctx: Context,
    show_type: bool,
    show_size: bool,
    show_pretty: bool,
    show_exists: bool,
    batch: str | None,
    batch_check: str | None,
    batch_all_objects: bool,
    buffer: bool,
    nul: bool,
    args: tuple[str, ...],
) -> None:
    """Show object NAME (a revision: an id, a unique prefix of 4+ hex digits, a ref, NAME~N, NAME:PATH…).

    \b
    reel cat-file (-t | -s | -p | -e) NAME
    reel cat-file KIND NAME          (the raw content, if NAME is a KIND)
    reel cat-file (--batch[=FORMAT] | --batch-check[=FORMAT]) [-z] [--buffer] [--batch-all-objects]
    FORMAT atoms: %(objectname) (also :short, :short=N), %(objecttype), %(objectsize), %(rest).
    """
    modes = [
        flag
        for flag, on in (
            ("-t", show_type),
            ("-s", show_size),
            ("-p", show_pretty),
            ("-e", show_exists),
            ("--batch", batch is not None),
            ("--batch-check", batch_check is not None),
        )
        if on
    ]
    if len(modes) > 1:
        raise click.UsageError(f"{modes[0]} and {modes[1]} cannot be used together")
    spec = batch if batch is not None else batch_check
    if spec is not None:
        if args:
            raise click.UsageError("--batch and --batch-check take names on stdin, not NAME")
        fmt = batch_format(spec)
        names = sorted(h.hex().encode() for h in ctx.repo.objects) if batch_all_objects else None
        _batch(ctx, names, fmt, batch is not None, buffer, b"\0" if nul and not batch_all_objects else b"\n")
        return
    if batch_all_objects or nul:
        raise click.UsageError("--batch-all-objects and -z need --batch or --batch-check")
    from reelstore.cli.refargs import revision

    repo = ctx.repo
    if not modes:
        if len(args) != 2:
            raise click.UsageError("give one of -t, -s, -p, -e and a NAME, or KIND NAME")
        kind, name = args
        obj = repo.objects.get(revision(repo, name))
        if obj.kind != kind:
            raise BadInput(f"{name} is a {obj.kind}, not a {kind}")
        if ctx.json:
            ctx.emit({"id": obj.id.hex(), "kind": obj.kind, "object": obj.to_json()})
        else:
            write_bytes(obj.content())
        return
    if len(args) != 1:
        raise click.UsageError(f"{modes[0]} takes one object NAME")
    name = args[0]
    if show_exists:
        try:
            repo.objects.get(revision(repo, name))
        except NotFound:
            click.get_current_context().exit(NotFound.exit_status)
        return
    obj = repo.objects.get(revision(repo, name))
    if show_type:
        ctx.emit({"id": obj.id.hex(), "kind": obj.kind}, obj.kind)
    elif show_size:
        size = len(obj.content())
        ctx.emit({"id": obj.id.hex(), "size": size}, str(size))
    elif ctx.json:
        ctx.emit({"id": obj.id.hex(), "kind": obj.kind, "object": obj.to_json()})
    elif obj.kind == "chunks":
        from reelstore.backend import content

        out = sys.stdout.buffer
        for piece in content.read(repo.objects, obj.id):
            out.write(piece)
        out.flush()
    else:
        write_bytes(pretty(obj))


COMMANDS = [cat_file]
