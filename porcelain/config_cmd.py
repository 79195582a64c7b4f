"""`reel config`: read and write `.reel/config` with git-config's keys and options."""

from __future__ import annotations

import click

from reelstore.cli.context import Context, pass_ctx
from reelstore.errors import BadInput, NotFound


@click.command("config")
@click.option("--get", "mode", flag_value="get", help="Print KEY's (last) value; E001 if unset.")
@click.option("--get-all", "mode", flag_value="get-all", help="Print every value of KEY, one per line.")
@click.option("--add", "mode", flag_value="add", help="Add VALUE to KEY, keeping its other values.")
@click.option("--unset", "mode", flag_value="unset", help="Remove KEY (E014 if it has several values).")
@click.option("--unset-all", "mode", flag_value="unset-all", help="Remove every value of KEY.")
@click.option("-l", "--list", "mode", flag_value="list", help="Print every key=value.")
@click.option(
    "--services",
    "mode",
    flag_value="services",
    help="List every service rule in force, configured and built-in (marked), as requests are classed.",
)
@click.argument("key", required=False)
@click.argument("value", required=False)
@pass_ctx
def config(ctx: Context, mode: str | None, key: str | None, value: str | None) -> None:
    """Print KEY's value (E001 if unset), or set it to VALUE. Keys are section[.subsection].name."""
    cfg = ctx.repo.config
    if mode == "services":
        if key is not None:
            raise click.UsageError("--services takes no KEY")
        _services(ctx)
        return
    if mode == "list":
        if key is not None:
            raise click.UsageError("--list takes no KEY")
        pairs = cfg.items()
        ctx.emit([{"key": k, "value": v} for k, v in pairs], "\n".join(f"{k}={v}" for k, v in pairs))
        return
    if key is None:
        raise click.UsageError("give a KEY (or --list)")
    needs_value = mode in (None, "add") and (mode == "add" or value is not None)
    if mode == "add" and value is None:
        raise click.UsageError("--add needs KEY and VALUE")
    if mode in ("get", "get-all", "unset", "unset-all") and value is not None:
        raise click.UsageError(f"--{mode} takes only KEY")
    if needs_value:
        assert value is not None
        cfg.set(key, value, add=mode == "add")
        ctx.emit({"key": key, "value": value})
        return
    values = cfg.get_all(key)
    if not values:
        raise NotFound(f"config key {key} is not set", key=key)
    if mode == "unset" and len(values) > 1:
        raise BadInput(f"config key {key} has {len(values)} values; use --unset-all")
    if mode in ("unset", "unset-all"):
        removed = cfg.unset(key)
        ctx.emit({"key": key, "removed": removed})
    elif mode == "get-all":
        ctx.emit({"key": key, "values": values}, "\n".join(values))
    else:
        ctx.emit({"key": key, "value": values[-1]}, values[-1])


def _services(ctx: Context) -> None:
    from reelstore.backend.service_rules import services

    rules = services(ctx.repo.config)

    def text() -> str:
        lines = []
        for r in rules:
            klass = "read" if r.read_like else f"class {r.effect_class} {r.delivery}"
            where = r.match + (f" *{r.suffix}" if r.suffix else "")
            lines.append(f"{r.name}\t{where}\t{klass}" + ("\t(built-in)" if r.builtin else ""))
        return "\n".join(lines)

    ctx.emit({"services": [r.to_json() for r in rules]}, text)


COMMANDS = [config]
