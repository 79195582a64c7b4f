"""`reel verify-pack`: check packs and their indexes byte by byte; -v lists every entry."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict
from pathlib import Path

import click

from reelstore.backend.disk_store import on_disk
from reelstore.backend.packs import pack_verify
from reelstore.backend.packs.pack import Pack
from reelstore.cli.context import Context, pass_ctx
from reelstore.errors import BadInput, StorageError, input_error
from reelstore.wording import plural


def _packs(ctx: Context, paths: tuple[str, ...]) -> tuple[list[Pack], list[str]]:
    """The packs to check (named, or every pack of the store) and the files that could not be opened."""
    problems: list[str] = []
    packs: list[Pack] = []
    if not paths:
        store = on_disk(ctx.repo.objects, "verify-pack")
        store.refresh(force=True)
        problems = [f"{name}: {why}" for name, why in sorted(store.problems().items())]
        return store.packs(), problems
    for p in paths:
        path = Path(p)
        if path.is_dir():
            raise BadInput(f"{p} is a directory, not a pack")
        named = [path] + [f for f in (path.with_suffix(".pack"), path.with_suffix(".idx")) if f != path]
        for f in named:
            try:
                f.stat()
            except OSError as exc:
                raise input_error(exc, f) from None
        try:
            packs.append(Pack(path.with_suffix(".pack"), path.with_suffix(".idx")))
        except StorageError as err:
            problems.append(err.message)
        except OSError as exc:
            raise input_error(exc, exc.filename or p) from None
    return packs, problems


@click.command("verify-pack")
@click.option(
    "-v",
    "verbose",
    is_flag=True,
    help="List every entry as git does: id, kind, size, packed size, offset (a delta: depth, base id).",
)
@click.option("-s", "stat_only", is_flag=True, help="Only the histogram of delta chain lengths.")
@click.argument("packs", nargs=-1, type=click.Path())
@pass_ctx
def verify_pack(ctx: Context, verbose: bool, stat_only: bool, packs: tuple[str, ...]) -> None:
    """Verify each PACK (a .pack or .idx path; default every pack of the store). Exit 3 on any damage;
    a PACK (or its .idx) that does not exist is E001 (exit 4), a directory or an unreadable one E014."""
    opened, problems = _packs(ctx, packs)
    docs = []
    out: list[str] = []
    for pack in opened:
        infos, damage = pack_verify.verify_pack(pack)
        problems.extend(damage)
        depths = Counter(i.depth for i in infos)
        if verbose and not stat_only:
            at = {i.offset: i.id for i in infos}
            for i in infos:
                line = f"{i.id.hex()} {i.kind:<6} {i.size} {i.packed} {i.offset}"
                if i.base is not None:
                    base = at.get(i.base)
                    line += f" {i.depth} {base.hex() if base else f'(offset {i.base})'}"
                out.append(line)
        if verbose or stat_only:
            out.append(f"non delta: {plural(depths.get(0, 0), 'object')}")
            out.extend(f"chain length = {d}: {plural(n, 'object')}" for d, n in sorted(depths.items()) if d)
        out.append(f"{pack.path}: {'bad' if damage else 'ok'}")
        docs.append(
            {
                "pack": str(pack.path),
                "ok": not damage,
                "count": pack.count,
                "problems": damage,
                "entries": [{**asdict(i), "id": i.id.hex()} for i in infos] if verbose else None,
            }
        )
        pack.close()
    ctx.emit({"packs": docs, "problems": problems}, "\n".join(out))
    if problems:
        if not ctx.json:
            for line in problems:
                click.echo(f"damage: {line}", err=True)
        raise StorageError(f"{plural(len(problems), 'problem')}; first: {problems[0]}", problems=len(problems))


COMMANDS = [verify_pack]
