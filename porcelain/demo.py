"""`reel demo`: the protocol in one minute, run for real in a scratch store.

Two views queue file writes; one commits (its write happens), one aborts (its write never happens,
and after gc its effect object is gone). Every step is a real `reel` command, printed as it runs.
"""

from __future__ import annotations

import json
import shlex
import shutil
import tempfile
from pathlib import Path

import click

from reelstore.cli.context import Context, pass_ctx


def _run(store: Path, *args: str) -> int:
    """Run one real `reel` command in-process against `store`, echoing it first."""
    from reelstore.cli.main import cli

    click.secho(f"$ reel {shlex.join(args)}", bold=True)
    code = cli.main(args=["-C", str(store), *args], prog_name="reel", standalone_mode=False)
    code = code if isinstance(code, int) else 0
    if code:
        click.secho(f"(exit status {code})", dim=True)
    click.echo()
    return code


def _say(text: str) -> None:
    click.secho(f"# {text}", fg="cyan")


def _effect_ids(store: Path, view: str) -> list[str]:
    from reelstore.api import Store
    from reelstore.storage.repo import Repo

    return [e["id"] for e in Store(Repo.open(store)).status(view)["effects"]]


@click.command("demo")
@click.option("--dir", "directory", type=click.Path(file_okay=False), help="Run in DIR and keep it (default: a "
              "temporary directory, removed afterwards).")
@pass_ctx
def demo(ctx: Context, directory: str | None) -> None:
    """Fork two views, queue fs effects, commit one, abort the other, gc, and show what fired and what vanished."""
    base = Path(directory) if directory else Path(tempfile.mkdtemp(prefix="reel-demo-"))
    base.mkdir(parents=True, exist_ok=True)
    try:
        _demo(base)
    finally:
        if directory is None:
            shutil.rmtree(base, ignore_errors=True)


def _demo(base: Path) -> None:
    _say(f"a scratch store in {base}; the fs adapter writes under {base / 'outbox'}")
    _run(base, "init")
    _run(base, "config", "adapter.fs.root", "outbox")
    _say("two attempts at the same task, each in its own view")
    _run(base, "fork", "attempt-1")
    _run(base, "fork", "attempt-2", "--cap", "read,write=notes/", "--cap", "fire_c=fs:reports/;budget=2")
    (base / "plan.txt").write_text("1. draft the report\n2. publish it\n")
    _run(base, "put", "attempt-1", "notes/plan.txt", str(base / "plan.txt"))
    _run(base, "put", "attempt-2", "notes/plan.txt", str(base / "plan.txt"))
    _say("each queues a side effect; nothing leaves the machine yet")
    good = json.dumps({"action": "write", "path": "reports/final.txt", "content": "the report, attempt 1\n"})
    bad = json.dumps({"action": "write", "path": "reports/wrong.txt", "content": "a bad draft, attempt 2\n"})
    _run(base, "effect", "attempt-1", "--adapter", "fs", "--op", good)
    _run(base, "effect", "attempt-2", "--adapter", "fs", "--op", bad)
    _say("attempt-2 was given a narrower capability; it cannot widen it, nor write outside notes/")
    _run(base, "fork", "sneaky", "--from", "attempt-2", "--cap", "fire_c=")
    _run(base, "put", "attempt-2", "secrets.txt", str(base / "plan.txt"))
    _run(base, "status", "attempt-1")
    (kept,) = _effect_ids(base, "attempt-1")
    (dropped,) = _effect_ids(base, "attempt-2")
    _say("a pending effect is an object like any other")
    _run(base, "cat-file", "-p", kept)
    _say("commit attempt-1: the trunk advances, then its effect is drained (sent, journaled)")
    _run(base, "commit", "attempt-1", "-m", "publish the report")
    _say("abort attempt-2: its ref is deleted; no fire capability is ever minted for it")
    _run(base, "abort", "attempt-2")
    _say("its effect object still exists until gc; it is unreachable from every ref")
    _run(base, "cat-file", "-e", dropped)
    _run(base, "gc", "--prune=now")
    _say("after gc it is gone (exit status 4)")
    _run(base, "cat-file", "-e", dropped)
    _run(base, "log")
    outbox = base / "outbox"
    fired = sorted(str(p.relative_to(outbox)) for p in outbox.rglob("*") if p.is_file()) if outbox.exists() else []
    _say(f"fired:    {', '.join(fired) or 'nothing'}  (written by attempt-1's committed effect {kept[:12]})")
    vanished = "reports/wrong.txt was never written" if not (outbox / "reports/wrong.txt").exists() else "LEAKED"
    _say(f"vanished: effect {dropped[:12]} of aborted attempt-2; {vanished}")


COMMANDS = [demo]
