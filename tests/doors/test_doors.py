"""One scenario through every door: the `reel` command, `Store` (its `view` block and `commit`),
`AsyncStore`, and the MCP server driven by the official MCP client. Each door works on its own clone
of a real bare git remote (made by `git init --bare` and `reel push`): fork, put, queue an fs effect,
commit. Every door must keep the same promises: the record wins the remote's trunk first, the view's
copy there is gone, and the effect fires once."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import REEL
from gitserver import bare, git
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from reelstore import sync
from reelstore.aio import AsyncStore
from reelstore.api import Store
from reelstore.backend.repo import Repo
from reelstore.objects import Record

NOTE = "notes/plan.txt"
TEXT = "refund order 42\n"
OP = {"action": "write", "path": "out/refund.txt", "content": "refunded 42\n"}
CAPS = ["read,write=notes/", "fire_c=fs:out/"]


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "REEL_DIR"}


def _reel(*args: str, cwd: Path, input: bytes | None = None) -> str:
    proc = subprocess.run([REEL, *args], cwd=cwd, env=_env(), input=input, capture_output=True, timeout=60)
    assert proc.returncode == 0, f"reel {' '.join(args)}: {proc.stderr.decode()}"
    return proc.stdout.decode()


def _cli(store: Path) -> None:
    _reel("fork", "task", *(a for c in CAPS for a in ("--cap", c)), cwd=store)
    _reel("put", "task", NOTE, "-", cwd=store, input=TEXT.encode())
    _reel("effect", "task", "--adapter", "fs", "--op", json.dumps(OP), cwd=store)
    _reel("commit", "task", "-m", "task", cwd=store)


def _store_view(store: Path) -> None:
    with Store.open(store).view("task", caps=CAPS, message="task") as v:
        v.put(NOTE, TEXT)
        v.effect("fs", OP)


def _store_commit(store: Path) -> None:
    s = Store.open(store)
    v = s.fork("task", caps=CAPS)
    v.put(NOTE, TEXT)
    v.effect("fs", OP)
    s.commit("task", "task")


def _async(store: Path) -> None:
    async def go() -> None:
        async with AsyncStore.open(store).view("task", caps=CAPS, message="task") as v:
            await v.put(NOTE, TEXT)
            await v.effect("fs", OP)

    asyncio.run(go())


def _mcp(store: Path) -> None:
    async def go() -> None:
        params = StdioServerParameters(command=REEL, args=["-C", str(store), "mcp"], env=_env())
        async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
            await client.initialize()
            for tool, args in [
                ("fork", {"name": "task", "caps": CAPS}),
                ("put", {"view": "task", "files": [{"path": NOTE, "text": TEXT}]}),
                ("effect", {"view": "task", "adapter": "fs", "op": OP}),
                ("commit", {"view": "task", "message": "task"}),
            ]:
                result = await client.call_tool(tool, args)
                assert not result.isError, (tool, [getattr(c, "text", "") for c in result.content])

    asyncio.run(go())


def _notes(store: Path) -> list[str]:
    """Every note in the store's trunk, as a fresh view reads them."""
    look = Store.open(store).fork("look")
    return [look.get(name).decode() for name, _ in look.ls("notes/")]


DOORS: dict[str, Callable[[Path], None]] = {
    "cli": _cli,
    "store-view": _store_view,
    "store-commit": _store_commit,
    "async": _async,
    "mcp": _mcp,
}


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, object]]:
    """Each door's run on its own clone, as what the clone, its remote and the effect's target show."""
    base = tmp_path_factory.mktemp("doors")
    seed = base / "seed"
    _reel("init", str(seed), cwd=base)
    out: dict[str, dict[str, object]] = {}
    for door, run in DOORS.items():
        remote = bare(base / f"{door}.git")
        _reel("remote", "add", door, str(remote), cwd=seed)
        _reel("push", door, cwd=seed)
        store = base / door
        _reel("clone", str(remote), str(store), cwd=base)
        before = Repo.open(store).refs["refs/heads/main"]
        run(store)
        repo = Repo.open(store)
        check = base / f"{door}-check"
        sync.clone(str(remote), check)
        entry = Store.open(store).log(limit=1)[0]
        record = repo.cache.load(entry.record, Record)
        out[door] = {
            "moved": repo.refs["refs/heads/main"] != before,
            "local == remote": repo.refs["refs/heads/main"] == Repo.open(check).refs["refs/heads/main"],
            "tracking == local": repo.refs.get("refs/remotes/origin/heads/main") == repo.refs["refs/heads/main"],
            "view ref on remote": "refs/reel/views/task" in git("--git-dir", str(remote), "for-each-ref"),
            "local view": repo.refs.get("refs/views/task") is not None,
            "namespace": record.namespace.hex(),
            "note": _notes(check),
            "effects": [e.state for e in entry.effects],
            "written": (store / "out" / "refund.txt").read_text(),
        }
    return out


@pytest.mark.parametrize("door", list(DOORS))
def test_every_door_commits_through_the_tracked_remote(outcomes: dict[str, dict[str, object]], door: str) -> None:
    got = outcomes[door]
    assert got == {**outcomes["cli"], "namespace": got["namespace"]}, door
    assert got["moved"] and got["local == remote"] and got["tracking == local"]
    assert not got["view ref on remote"] and not got["local view"]
    assert got["note"] == [TEXT] and got["effects"] == ["succeeded"] and got["written"] == OP["content"]


def test_every_door_lands_the_same_namespace(outcomes: dict[str, dict[str, object]]) -> None:
    assert len({o["namespace"] for o in outcomes.values()}) == 1
