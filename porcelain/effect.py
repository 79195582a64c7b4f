"""`reel effect`: queue a Class B or C effect in a view. Nothing leaves the machine."""

from __future__ import annotations

import json

import click

from reelstore.api import Store
from reelstore.cli.complete import OPS, VIEWS
from reelstore.cli.context import Context, pass_ctx
from reelstore.drain.owners import task_op_id
from reelstore.errors import BadInput
from reelstore.kernel.views import load_live


def _version_ref(text: str | None) -> dict[str, str] | None:
    if text is None:
        return None
    kind, eq, value = text.partition("=")
    if not eq or not kind or not value:
        raise BadInput(f"--version-ref must look like KIND=VALUE, not {text!r}")
    return {"kind": kind, "value": value}


@click.command("effect")
@click.argument("view", shell_complete=VIEWS)
@click.option("--adapter", "adapter_name", required=True, help="Adapter that delivers it (fs, http, …).")
@click.option("--op", "op_text", required=True, metavar="JSON", help="The operation, a JSON object.")
@click.option("--class", "effect_class", type=click.Choice(["B", "C"]), help="Override the adapter's class.")
@click.option("--version-ref", metavar="KIND=VALUE", help="Class B: the version the precondition checks.")
@click.option(
    "--supersedes",
    metavar="OP",
    shell_complete=OPS,
    help="A fresh attempt at operation OP (linked; OP keeps its state).",
)
@click.option("--approved-by", default="", metavar="NAME", help="With --supersedes: who authorised it (not you).")
@click.option(
    "--key",
    metavar="TASK",
    help="Task key: the operation id derives from (trunk, TASK), so the task is never queued or sent twice.",
)
@pass_ctx
def effect(
    ctx: Context,
    view: str,
    adapter_name: str,
    op_text: str,
    effect_class: str | None,
    version_ref: str | None,
    supersedes: str | None,
    approved_by: str,
    key: str | None,
) -> None:
    """Admit an effect into VIEW's buffer; it fires only when the view's changes reach a trunk."""
    try:
        op = json.loads(op_text)
    except ValueError as exc:
        raise BadInput(f"--op is not JSON: {exc}") from None
    if not isinstance(op, dict):
        raise BadInput("--op must be a JSON object")
    made = (
        Store(ctx.repo)
        .handle(view)
        .effect(
            adapter_name,
            op,
            effect_class,
            _version_ref(version_ref),
            supersedes=supersedes,
            approved_by=approved_by,
            key=key,
        )
    )
    doc = {
        "view": view,
        "id": made.id.hex(),
        "class": made.effect_class,
        "resource": made.resource,
        "delivery": made.delivery,
    }
    if key is not None:
        doc["key"] = key
        doc["op"] = task_op_id(load_live(ctx.repo, view, settle=False).trunk, key)
    if supersedes is not None:
        doc["supersedes"] = str(made.meta["supersedes"])
    ctx.emit(doc, made.id.hex())


COMMANDS = [effect]
