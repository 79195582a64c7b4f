"""`reel bundle`: a store's refs and all they reach as one byte-deterministic file."""

from __future__ import annotations

import click

from reelstore.cli.complete import REVISIONS
from reelstore.cli.context import Context, pass_ctx
from reelstore.errors import Conflict
from reelstore.maintenance import bundle as bundles
from reelstore.wording import plural


def _refs_text(info: bundles.BundleInfo) -> str:
    return "\n".join(f"{h.hex()} {name}" for name, h in info.refs)


@click.group("bundle")
def bundle() -> None:
    """Create, verify and unbundle single-file archives of refs and their objects."""


@bundle.command("create")
@click.argument("file", type=click.Path(dir_okay=False))
@click.argument("refs", nargs=-1, shell_complete=REVISIONS)
@pass_ctx
def create(ctx: Context, file: str, refs: tuple[str, ...]) -> None:
    """Write FILE with REFS (default: every trunk, live view and snapshot) and everything they reach."""
    info = bundles.create(ctx.repo, file, refs)
    ctx.emit(
        info.to_json(),
        f"wrote {file}: {plural(len(info.refs), 'ref')}, {plural(info.objects, 'object')}, "
        f"{plural(info.size, 'byte')}, "
        f"blake3 {info.digest}",
    )


@bundle.command("verify")
@click.argument("file", type=click.Path(dir_okay=False))
@pass_ctx
def verify(ctx: Context, file: str) -> None:
    """Check FILE whole (every object re-hashed and decoded, closure complete, trailer); list its refs."""
    info = bundles.verify(file)
    ctx.emit(
        info.to_json(),
        f"{_refs_text(info)}\n{file} is okay: {plural(len(info.refs), 'ref')}, {plural(info.objects, 'object')}",
    )


@bundle.command("list-heads")
@click.argument("file", type=click.Path(dir_okay=False))
@pass_ctx
def list_heads(ctx: Context, file: str) -> None:
    """Print the refs FILE holds (after verifying it)."""
    info = bundles.verify(file)
    ctx.emit(info.to_json(), _refs_text(info))


@bundle.command("unbundle")
@click.option("--update-refs", is_flag=True, help="Create the bundle's refs this store lacks.")
@click.option(
    "--with-pending-effects",
    is_flag=True,
    help="With --update-refs, also make live the views that hold pending effects (dangerous if the "
    "store the bundle came from still commits them).",
)
@click.argument("file", type=click.Path(dir_okay=False))
@pass_ctx
def unbundle(ctx: Context, update_refs: bool, with_pending_effects: bool, file: str) -> None:
    """Store FILE's objects (each verified); with --update-refs also create its refs that are absent here."""
    info = bundles.unbundle(ctx.repo, file)
    doc: dict[str, object] = info.to_json()
    lines = [_refs_text(info)] if info.refs else []
    lines.append(f"stored {plural(info.objects, 'object')}")
    report = None
    if update_refs:
        report = bundles.update_refs(ctx.repo, info, pending_effects=with_pending_effects)
        doc.update(
            created=report.created,
            unchanged=report.unchanged,
            conflicting=report.conflicting,
            held_back=report.held_back,
        )
        lines += [f"created {name}" for name in report.created]
        lines += [f"left {name}: this store has it at another object" for name in report.conflicting]
        lines += [
            f"held back {name}: a live view with pending effects (see --with-pending-effects)"
            for name in report.held_back
        ]
    ctx.emit(doc, "\n".join(lines))
    if report is not None and report.conflicting:
        raise Conflict(
            f"{len(report.conflicting)} of the bundle's refs differ here and were left as they are: "
            + ", ".join(report.conflicting)
        )


COMMANDS = [bundle]
