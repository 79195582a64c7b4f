"""A user's type checker sees the real types of the public API: `reveal_type(Store.open())` is a
Store, the errors are exported classes, and the package ships `py.typed`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import reelstore

ROOT = Path(__file__).resolve().parents[2]

SNIPPET = """\
import reelstore
from reelstore import CommitResult, NotFound, ReelError, Store

store = Store.open(".")
reveal_type(store)
reveal_type(reelstore.Store.memory())
reveal_type(store.open_view("v"))
reveal_type(store.commit("v"))
err: ReelError = NotFound("x")
reveal_type(err.code)
result: CommitResult = store.commit("v")
reveal_type(store.status("v"))
reveal_type(store.status("v").changes)
reveal_type(store.open_view("v").diff())
reveal_type(store.views())
reveal_type(store.ops())
reveal_type(store.commit("v").drain)
reveal_type(store.hold("audit"))
reveal_type(store.gc())
for op in store.status("v").changes:
    if isinstance(op, reelstore.Put):
        reveal_type(op.id)


async def use(a: reelstore.AsyncStore) -> None:
    reveal_type(await a.status("v"))
    reveal_type(await a.handle("v").diff())
    reveal_type(await a.views())
"""


def test_reveal_type_of_store_open_is_store(tmp_path: Path) -> None:
    user = tmp_path / "user.py"
    user.write_text(SNIPPET)
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent", "--no-incremental", str(user)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    revealed = [line.split("Revealed type is ", 1)[1] for line in proc.stdout.splitlines() if "Revealed type" in line]
    assert revealed[:4] == [
        '"reelstore.api.Store"',
        '"reelstore.api.Store"',
        '"reelstore.api.ViewHandle"',
        '"reelstore.kernel.verbs.CommitResult"',
    ], proc.stdout
    assert revealed[4] in ('"str"', '"builtins.str"'), proc.stdout
    typed = [r.replace("builtins.", "").strip('"') for r in revealed[5:]]
    changes = typed.pop(1)
    assert "fallback=reelstore.objects.delta.Put" in changes and "fallback=reelstore.objects.delta.Remove" in changes
    assert typed == [
        "reelstore.kernel.inspection.ViewStatus",
        "list[reelstore.kernel.inspection.NameChange]",
        "list[reelstore.kernel.inspection.ViewSummary]",
        "list[reelstore.drain.ops.Operation]",
        "reelstore.drain.drainer.DrainReport | None",
        "reelstore.drain.hold.Hold",
        "reelstore.backend.upkeep.GcReport",
        "reelstore.objects.hash.Hash",
        "reelstore.kernel.inspection.ViewStatus",
        "list[reelstore.kernel.inspection.NameChange]",
        "list[reelstore.kernel.inspection.ViewSummary]",
    ], proc.stdout
    assert " error: " not in proc.stdout, proc.stdout


def test_every_error_class_is_exported() -> None:
    from reelstore import errors

    classes = {n for n, v in vars(errors).items() if isinstance(v, type) and issubclass(v, errors.ReelError)}
    assert classes <= set(reelstore.__all__)
    assert all(getattr(reelstore, n) is getattr(errors, n) for n in classes)


def test_lazy_names_resolve_and_unknown_names_fail() -> None:
    from reelstore.api import Store

    assert reelstore.Store is Store
    assert all(isinstance(getattr(reelstore, n), type) for n in reelstore.__all__ if n != "DeltaOp")
    assert set(reelstore.DeltaOp.__args__) == {reelstore.Put, reelstore.Remove}
    try:
        reelstore.NoSuchThing  # noqa: B018
    except AttributeError as exc:
        assert "NoSuchThing" in str(exc)
    else:
        raise AssertionError("an unknown name must raise AttributeError")


def test_py_typed_ships() -> None:
    assert (ROOT / "reelstore" / "py.typed").is_file()
    assert "reelstore = py.typed" in (ROOT / "setup.cfg").read_text()
