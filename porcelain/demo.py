"""`reel demo`: the protocol in one minute, run for real in a scratch store.

Two views queue file writes; one commits (its write happens), one aborts (its write never happens,
and after gc its effect object is gone). Every step is a real `reel` command, printed as it runs.
"""

from __future__ import annotations

import contextlib
import io
import json
import shlex
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from reelstore.cli.context import Context, pass_ctx


class _Demo:
    """Runs the steps against one scratch store: echoed as text, or (under --json) recorded as one
    document of steps, each with the command, its exit status and its own JSON output."""

    def __init__(self, store: Path, as_json: bool) -> None:
        self.store = store
        self.json = as_json
        self.steps: list[dict[str, Any]] = []

    def run(self, *args: str) -> int:
        """Run one real `reel` command in-process against the store."""
        from reelstore.cli.main import cli

        argv = ["-C", str(self.store), *args]
        if not self.json:
            click.secho(f"$ reel {shlex.join(args)}", bold=True)
            code = _exit_code(lambda: cli.main(args=argv, prog_name="reel", standalone_mode=False))
            if code:
                click.secho(f"(exit status {code})", dim=True)
            click.echo()
            return code
        out = io.BytesIO()
        text = io.TextIOWrapper(out, encoding="utf-8", write_through=True)
        with contextlib.redirect_stdout(text), contextlib.redirect_stderr(io.StringIO()):
            code = _exit_code(lambda: cli.main(args=["--json", *argv], prog_name="reel", standalone_mode=False))
        raw = out.getvalue().decode("utf-8", "replace")
        try:
            output: Any = json.loads(raw) if raw.strip() else None
        except json.JSONDecodeError:
            output = raw
        self.steps.append({"command": ["reel", *args], "exit": code, "output": output})
        return code

    def say(self, text: str) -> None:
        if self.json:
            self.steps.append({"note": text})
        else:
            click.secho(f"# {text}", fg="cyan")


def _exit_code(call: Callable[[], Any]) -> int:
    """The exit status of one in-process command: its return value, or the status it exited with."""
    try:
        code = call()
    except SystemExit as exc:
        code = exc.code
    except click.exceptions.Exit as exc:
        code = exc.exit_code
    return code if isinstance(code, int) else 0


def _effect_ids(store: Path, view: str) -> list[str]:
    from reelstore.api import Store
    from reelstore.backend.repo import Repo

    return [e.id.hex() for e in Store(Repo.open(store)).status(view).effects]


@click.command("demo")
@click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False),
    help="Run in DIR and keep it (default: a temporary directory, removed afterwards).",
)
@pass_ctx
def demo(ctx: Context, directory: str | None) -> None:
    """Fork two views, queue fs effects, commit one, abort the other, gc, and show what fired and what vanished."""
    base = Path(directory) if directory else Path(tempfile.mkdtemp(prefix="reel-demo-"))
    base.mkdir(parents=True, exist_ok=True)
    run = _Demo(base, ctx.json)
    try:
        fired, kept, dropped, leaked = _demo(run)
        if ctx.json:
            ctx.emit(
                {
                    "store": str(base),
                    "steps": run.steps,
                    "fired": fired,
                    "kept_effect": kept,
                    "dropped_effect": dropped,
                    "dropped_effect_fired": leaked,
                }
            )
    finally:
        if directory is None:
            shutil.rmtree(base, ignore_errors=True)


def _demo(d: _Demo) -> tuple[list[str], str, str, bool]:
    """The steps; returns (files fired, kept effect, dropped effect, whether the dropped one leaked)."""
    base = d.store
    d.say(f"a scratch store in {base}; the fs adapter writes under {base / 'outbox'}")
    d.run("init")
    d.run("config", "adapter.fs.root", "outbox")
    d.say("two attempts at the same task, each in its own view")
    d.run("fork", "attempt-1")
    d.run("fork", "attempt-2", "--cap", "read,write=notes/", "--cap", "fire_c=fs:reports/;budget=2")
    (base / "plan.txt").write_text("1. draft the report\n2. publish it\n")
    d.run("put", "attempt-1", "notes/plan.txt", str(base / "plan.txt"))
    d.run("put", "attempt-2", "notes/plan.txt", str(base / "plan.txt"))
    d.say("each queues a side effect; nothing leaves the machine yet")
    good = json.dumps({"action": "write", "path": "reports/final.txt", "content": "the report, attempt 1\n"})
    bad = json.dumps({"action": "write", "path": "reports/wrong.txt", "content": "a bad draft, attempt 2\n"})
    d.run("effect", "attempt-1", "--adapter", "fs", "--op", good)
    d.run("effect", "attempt-2", "--adapter", "fs", "--op", bad)
    d.say("attempt-2 was given a narrower capability; it cannot widen it, nor write outside notes/")
    d.run("fork", "sneaky", "--from", "attempt-2", "--cap", "fire_c=")
    d.run("put", "attempt-2", "secrets.txt", str(base / "plan.txt"))
    d.run("status", "attempt-1")
    (kept,) = _effect_ids(base, "attempt-1")
    (dropped,) = _effect_ids(base, "attempt-2")
    d.say("a pending effect is an object like any other")
    d.run("cat-file", "-p", kept)
    d.say("commit attempt-1: the trunk advances, then its effect is drained (sent, journaled)")
    d.run("commit", "attempt-1", "-m", "publish the report")
    d.say("abort attempt-2: its ref is deleted; no fire capability is ever minted for it")
    d.run("abort", "attempt-2")
    d.say("its effect object still exists until gc; it is unreachable from every ref")
    d.run("cat-file", "-e", dropped)
    d.run("gc", "--prune=now")
    d.say("after gc it is gone (exit status 4)")
    d.run("cat-file", "-e", dropped)
    d.run("log")
    outbox = base / "outbox"
    fired = sorted(str(p.relative_to(outbox)) for p in outbox.rglob("*") if p.is_file()) if outbox.exists() else []
    d.say(f"fired:    {', '.join(fired) or 'nothing'}  (written by attempt-1's committed effect {kept[:12]})")
    vanished = "reports/wrong.txt was never written" if not (outbox / "reports/wrong.txt").exists() else "LEAKED"
    d.say(f"vanished: effect {dropped[:12]} of aborted attempt-2; {vanished}")
    return fired, kept, dropped, vanished == "LEAKED"


COMMANDS = [demo]
