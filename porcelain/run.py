"""`reel run`: the dry-run loop. Fork a view, run a command with its effects intercepted, show what
it would do, then commit or abort the whole of it."""

from __future__ import annotations

import shlex
import sys
from typing import Any

import click

from reelstore.api import Store
from reelstore.backend.service_rules import model_origin
from reelstore.cli.complete import SOURCES
from reelstore.cli.context import Context, json_text, pass_ctx
from reelstore.extras import needs
from reelstore.intercept.loop import DryRun, default_backends
from reelstore.intercept.recording import RecordingProxy, calls_total
from reelstore.wording import plural

BLOCKED_EXIT = 6
"""--commit refused because the command tried to go around the proxy: a refusal, as a capability violation is."""
DECLINED_EXIT = 1
"""Not committed for want of a yes: "n" at the prompt, or no terminal to ask and no flag. Both aborted the
view, so both exit with this one status (as a declined prompt exits in git and apt)."""


def needs_interception(what: str) -> None:
    """The proxy speaks HTTP with h11 and mints certificates with cryptography: the `run` extra."""
    needs("h11", "run", what)
    needs("cryptography", "run", what)


def _summary_text(doc: dict[str, Any]) -> str:
    lines = [f"view {doc['view']}: ran {_short(shlex.join(doc['command']))} -> exit {doc['status']}"]
    lines.append("changes (Class A):" if doc["changes"] else "changes (Class A): none")
    lines += [f"  {c['status']:<9} {c['name']}" for c in doc["changes"]]
    lines.append("pending effects:" if doc["effects"] else "pending effects: none")
    for e in doc["effects"]:
        what = f"{e['method']} {e['url']}" if e["method"] else e["resource"]
        lines.append(f"  {e['index']}  {what}  class {e['class']}  {e['delivery']}  {e['id'][:12]}")
        if e.get("scrubbed"):
            lines.append(f"     credentials kept out of the store: {', '.join(e['scrubbed'])}")
    if doc["passed"]:
        lines.append("passed through (reads):")
        lines += [f"  {p['method']} {p['url']} -> {p['status']}" for p in doc["passed"]]
    if doc.get("model_calls"):
        lines.append("model calls (recorded):")
        lines += model_call_lines(doc["model_calls"])
    if doc.get("divergences"):
        lines.append("diverged from the recording:")
        for d in doc["divergences"]:
            near = d["nearest"]
            if d.get("model") is not None:
                lines.append(f"  model call {d['index']} ({d['model']}): {d['method']} {d['url']}")
                lines += [f"    {line}" for line in d["diff"].splitlines()]
                continue
            lines.append(
                f"  read {d['index']}: {d['method']} {d['url']}"
                + (f" (nearest recorded: {near['method']} {near['url']})" if near else "")
            )
    if doc["refused"]:
        lines.append("refused (not in the view):")
        lines += [f"  {r['what']}: {r['code']}: {r['message']}" for r in doc["refused"]]
    if doc["blocked"]:
        lines.append("blocked (tried to connect around the proxy; nothing was sent):")
        lines += [f"  {b['target']}" for b in doc["blocked"]]
    if doc["notes"]:
        lines.append("notes:")
        lines += [f"  {n}" for n in doc["notes"]]
    return "\n".join(lines)


def model_call_lines(calls: list[dict[str, Any]]) -> list[str]:
    """Model calls as `reel run` and `reel show` list them: model, tokens in/out, latency, then a total."""

    def n(v: int | None) -> str:
        return "?" if v is None else str(v)

    def stream(c: dict[str, Any]) -> str:
        return f" (streamed, first byte {c['first_ms']} ms)" if c["stream"] else ""

    lines = [
        f"  {c['index']}  {c['provider']} {c['model'] or '?'}  tokens {n(c['tokens_in'])} in / "
        f"{n(c['tokens_out'])} out  {c['latency_ms']} ms{stream(c)}"
        for c in calls
    ]
    t = calls_total(calls)
    lines.append(
        f"  total: {plural(t['calls'], 'call')}, tokens {t['tokens_in']} in / {t['tokens_out']} out, "
        f"{t['latency_ms']} ms"
    )
    return lines


def _short(text: str, limit: int = 100) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _commit_text(doc: dict[str, Any] | None) -> str:
    if not doc:
        return ""
    if doc["record"] is None:
        return f"merged view {doc['view']} into {doc['target']}"
    lines = [f"committed view {doc['view']} to {doc['target']} as record {doc['record']}"]
    for o in (doc["drain"] or {}).get("outcomes", []):
        lines.append(
            f"  effect {o['index']} {o['op']}: {o['state']} ({o['action']}){' - ' + o['note'] if o['note'] else ''}"
        )
    return "\n".join(lines)


def _cmd_exit(status: int) -> int:
    """The command's own status; killed by signal N: 128 + N, as a shell reports it."""
    return 128 - status if status < 0 else status


class BeforeDashDash(click.Command):
    """A command whose own options may come on either side of its positional arguments (`reel replay
    SRC --view V -- CMD`) when `--` separates CMD; without `--`, options end at the first word, so a
    command's own options are never taken for reel's."""

    positionals = 0
    """How many positional arguments come before CMD."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if "--" in args and self._only_ours(args[: args.index("--")]):
            ctx.allow_interspersed_args = True
        return super().parse_args(ctx, args)

    def _only_ours(self, head: list[str]) -> bool:
        """`head` holds only this command's options (with their values) and its positional arguments."""
        takes: dict[str, bool] = {}
        for p in self.params:
            if isinstance(p, click.Option):
                for name in (*p.opts, *p.secondary_opts):
                    takes[name] = not (p.is_flag or p.count)
        words = 0
        skip = False
        for tok in head:
            if skip:
                skip = False
            elif tok.startswith("-") and tok != "-":
                name = tok.split("=", 1)[0]
                if name not in takes:
                    return False
                skip = takes[name] and "=" not in tok
            else:
                words += 1
        return words <= self.positionals


@click.command(
    "run", cls=BeforeDashDash, context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False}
)
@click.option("--view", "view", metavar="NAME", help="Name of the view to fork (default: run-<time>-<hex>).")
@click.option(
    "--from",
    "source",
    metavar="SOURCE",
    shell_complete=SOURCES,
    help="Trunk or view to fork (default: the store's trunk).",
)
@click.option(
    "--cap",
    "caps",
    multiple=True,
    metavar="SPEC",
    help="Capability OPS=PREFIX[;expires=ISO-8601][;budget=N] for the view; repeatable.",
)
@click.option("--commit", "do_commit", is_flag=True, help="Commit a clean run without asking.")
@click.option("--abort", "do_abort", is_flag=True, help="Abort the view after showing what it holds.")
@click.option(
    "--dir",
    "prefix",
    default="",
    metavar="PREFIX",
    help="Scratch directory holds, and takes back, only names under PREFIX.",
)
@click.option("-m", "--message", default="", help="Record message (default: reel run: CMD).")
@click.option(
    "--allow",
    "allow",
    multiple=True,
    metavar="HOST:PORT",
    help="Let the command reach this loopback target, through the proxy only; repeatable.",
)
@click.option("--force", is_flag=True, help="With --commit: commit even if something was refused or blocked.")
@click.option(
    "--no-sandbox",
    "no_sandbox",
    is_flag=True,
    help="Run without a network namespace: a client that ignores the proxy can send effects.",
)
@click.option("--ca-path", "ca_path", is_flag=True, help="Print the path of the store's local CA certificate.")
@click.option("--record", is_flag=True, help="Keep every passed-through response in the view, for `reel replay`.")
@click.option(
    "--model",
    "models",
    multiple=True,
    metavar="ORIGIN",
    help="A local model server (http://127.0.0.1:8000): its model paths pass through; repeatable.",
)
@click.option("--keep", is_flag=True, help="Leave the view live after the summary: neither commit nor abort it.")
@click.argument("cmd", nargs=-1, type=click.UNPROCESSED)
@pass_ctx
def run(
    ctx: Context,
    view: str | None,
    source: str | None,
    caps: tuple[str, ...],
    do_commit: bool,
    do_abort: bool,
    prefix: str,
    message: str,
    allow: tuple[str, ...],
    force: bool,
    no_sandbox: bool,
    ca_path: bool,
    record: bool,
    keep: bool,
    models: tuple[str, ...],
    cmd: tuple[str, ...],
) -> None:
    """Run CMD in a fresh view: http(s) requests through a capturing proxy, the network sealed off
    around it, files in a scratch directory."""
    needs_interception("reel run")
    if ca_path:
        from reelstore.intercept.ca import ca_cert_path

        path = str(ca_cert_path(ctx.repo))
        click.echo(json_text({"ca": path}) if ctx.json else path)
        return
    if not cmd:
        raise click.UsageError("missing the command to run (reel run [OPTIONS] -- CMD...)")
    check_decision_flags(do_commit, do_abort, keep, force)
    models = tuple(model_origin(m) for m in models)  # E014 before anything is started
    proxy = (lambda repo, v: RecordingProxy(repo, v, allow, models)) if record else None
    backends = default_backends(prefix, allow, sandbox=not no_sandbox, proxy=proxy, models=models)
    if no_sandbox:
        click.echo(
            "warning: --no-sandbox: the command shares this machine's network; a client that ignores "
            "the proxy sends its requests for real, before any commit",
            err=True,
        )
    loop = DryRun(Store(ctx.repo), cmd, view, source, list(caps) or None, backends)
    execute_and_decide(ctx, loop, do_commit, do_abort, force, message, no_sandbox, keep)


def check_decision_flags(do_commit: bool, do_abort: bool, keep: bool, force: bool) -> None:
    if sum((do_commit, do_abort, keep)) > 1:
        raise click.UsageError("--commit, --abort and --keep exclude each other")
    if force and not do_commit:
        raise click.UsageError("--force goes with --commit")


def execute_and_decide(
    ctx: Context,
    loop: DryRun,
    do_commit: bool,
    do_abort: bool,
    force: bool,
    message: str,
    no_sandbox: bool,
    keep: bool = False,
) -> None:
    """Run the loop's command, show what it would land, then commit or abort it as asked (or as the
    user answers on a terminal); `reel run` and `reel replay` share it."""
    if no_sandbox:
        loop.notes.append("run without a sandbox: requests that ignored the proxy were not seen and may have been sent")
    status = loop.execute(stdout=2 if ctx.json else None)
    interactive = not (do_commit or do_abort or keep) and status == 0 and sys.stdin.isatty()
    if interactive:
        click.echo(_summary_text(loop.summary()), err=ctx.json)
        commit_it = click.confirm(f"commit view {loop.name}?", default=False, err=True)
    else:
        commit_it = do_commit and (loop.clean or (force and status == 0))
    exit_status = 0
    if status != 0:
        reason = f"the command exited {status}; a failing command is never committed"
        exit_status = _cmd_exit(status)
    elif commit_it:
        reason = "confirmed" if interactive else "--commit --force" if not loop.clean else "--commit"
    elif interactive:
        reason = "not confirmed"
        exit_status = DECLINED_EXIT
    elif do_abort:
        reason = "--abort"
    elif keep:
        reason = "--keep: the view stays live; commit or abort it later"
    elif do_commit:
        reason = (
            f"{len(loop.refused)} refused, {len(loop.blocked)} blocked; --commit lands only a run where "
            f"nothing was refused or blocked (--force to commit anyway)"
        )
        exit_status = loop.refused[0].exit_status if loop.refused else BLOCKED_EXIT
    else:
        reason = "no terminal to ask and neither --commit nor --abort given"
        exit_status = DECLINED_EXIT
    if commit_it:
        loop.commit(message)
    elif keep and status == 0:
        loop.decision = "keep"
    else:
        loop.abort()
    doc = loop.summary()
    doc["reason"] = reason
    decided = f"decision: {loop.decision} ({reason})"
    if ctx.json:
        click.echo(json_text(doc))
    else:
        parts = [decided] if interactive else [_summary_text(doc), decided]
        text = _commit_text(doc["commit"])
        click.echo("\n".join(parts + ([text] if text else [])))
    if loop.result is not None and loop.result.drain is not None:
        loop.result.drain.check()
    if exit_status:
        click.get_current_context().exit(exit_status)


COMMANDS = [run]
