"""The import graph of the library: arrows point down the layers only, no two units import each other,
no two modules import each other, directly or round a cycle (an import inside a function is an arrow
too), and the
library never imports the CLI packages (nor click). Imports under `if TYPE_CHECKING:` are annotations
only, not arrows."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "reelstore"
CLI = ("cli", "plumbing", "porcelain")

LAYERS = [
    {"errors", "crashpoints", "codec", "attribution", "wording", "extras"},
    {"objects", "hooks"},  # hooks: the sample installer and the runner, which needs only a Repo's type
    {"backend"},
    {"namespace"},
    {"adapters"},  # fired by the drain; the service rules they read live in the backend
    {"drain", "maintenance", "fleet"},  # fleet: drain workers on a shared Postgres outbox (imports drain)
    {"kernel", "revisions"},
    {"sync", "sim", "capture"},  # capture: in-process http capture, shared with the proxy
    {"api", "aio"},
    {"agents", "intercept"},
    {"integrations"},  # framework tool sets over the API
]
LEVEL = {unit: i for i, layer in enumerate(LAYERS) for unit in layer}


def _unit(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _runtime_imports(tree: ast.Module) -> list[str]:
    out: list[str] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.ImportFrom) and node.module:
            out.append(node.module)
            if node.module == "reelstore":
                out.extend(f"reelstore.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            out.extend(a.name for a in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return out


def _library() -> list[tuple[str, Path]]:
    out = []
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(ROOT)
        if rel.parts[1] in CLI or rel == Path("reelstore/__init__.py"):
            continue
        out.append((_unit(".".join(rel.with_suffix("").parts)), path))
    return out


def test_every_library_unit_has_a_layer() -> None:
    units = {unit for unit, _ in _library()}
    assert units - set(LEVEL) == set(), "place new subpackages in LAYERS"


def test_arrows_point_down_only() -> None:
    upward = []
    for unit, path in _library():
        for module in _runtime_imports(ast.parse(path.read_text("utf-8"))):
            if not module.startswith("reelstore."):
                continue
            target = _unit(module)
            if target in LEVEL and LEVEL[target] > LEVEL[unit]:
                upward.append(f"{path.relative_to(ROOT)} imports {module}")
    assert upward == []


def _unit_graph() -> dict[str, set[str]]:
    """unit -> the other library units it imports at run time."""
    graph: dict[str, set[str]] = {}
    for unit, path in _library():
        for module in _runtime_imports(ast.parse(path.read_text("utf-8"))):
            target = _unit(module) if module.startswith("reelstore.") else ""
            if target in LEVEL and target != unit:
                graph.setdefault(unit, set()).add(target)
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import cycle of `graph` (its units, the first repeated at the end), or [] if there is none."""
    done: set[str] = set()
    path: list[str] = []

    def visit(unit: str) -> list[str]:
        if unit in path:
            return path[path.index(unit) :] + [unit]
        if unit in done:
            return []
        path.append(unit)
        for target in sorted(graph.get(unit, ())):
            found = visit(target)
            if found:
                return found
        path.pop()
        done.add(unit)
        return []

    for unit in sorted(graph):
        found = visit(unit)
        if found:
            return found
    return []


def test_no_import_cycles_between_units() -> None:
    """Units sharing a layer may import each other one way only: a cycle would make them one unit."""
    assert _cycle(_unit_graph()) == []


def test_the_checker_sees_a_cycle() -> None:
    assert _cycle({"adapters": {"drain"}, "drain": {"backend", "adapters"}}) == ["adapters", "drain", "adapters"]
    assert _cycle({"drain": {"adapters"}, "adapters": {"backend"}}) == []


def _modules() -> dict[str, Path]:
    """Every library module by dotted name (a package by its own name, for its `__init__.py`)."""
    out = {}
    for _, path in _library():
        parts = path.relative_to(ROOT).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _module_imports(tree: ast.Module, known: set[str] | dict[str, Path]) -> set[str]:
    """The library modules `tree` imports at run time, wherever the import sits: `from P import M` names
    module P.M when there is one."""
    out = {m for m in _runtime_imports(tree) if m in known}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in known:
            out.update(f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in known)
    return out


def _module_graph() -> dict[str, set[str]]:
    """module -> the other library modules it imports at run time (in functions too)."""
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets = _module_imports(ast.parse(path.read_text("utf-8")), modules)
        graph[name] = {t for t in targets if t != name}
    return graph


def test_no_import_cycles_between_any_two_modules() -> None:
    """A module imports another one way only, at the top or in a function alike, inside a package, across
    nested packages (backend/packs, backend/refdb) and across units: a cycle hidden in a function is still
    a cycle (move the shared piece down, or invert the arrow)."""
    assert _cycle(_module_graph()) == []


def test_the_checker_sees_a_cycle_inside_a_package_even_in_a_function() -> None:
    known = {"reelstore.backend.a": Path(), "reelstore.backend.b": Path(), "reelstore.backend": Path()}
    a = ast.parse("from reelstore.backend import b\n")
    b = ast.parse("def f():\n    from reelstore.backend.a import x\n")
    graph = {"reelstore.backend.a": _module_imports(a, known), "reelstore.backend.b": _module_imports(b, known)}
    assert _cycle(graph) == ["reelstore.backend.a", "reelstore.backend.b", "reelstore.backend.a"]
    hidden = ast.parse("if TYPE_CHECKING:\n    from reelstore.backend.a import x\n")
    assert _cycle({**graph, "reelstore.backend.b": _module_imports(hidden, known)}) == []


def test_the_library_never_imports_the_cli_or_click() -> None:
    bad = []
    for _, path in _library():
        for module in _runtime_imports(ast.parse(path.read_text("utf-8"))):
            if (
                module == "click"
                or module.startswith("click.")
                or _unit(module) in CLI
                and module.startswith("reelstore.")
            ):
                bad.append(f"{path.relative_to(ROOT)} imports {module}")
    assert bad == []


def test_the_checker_sees_an_upward_arrow() -> None:
    tree = ast.parse("from reelstore.api import Store\nif TYPE_CHECKING:\n    from reelstore.kernel import verbs\n")
    assert _runtime_imports(tree) == ["reelstore.api"]
    assert LEVEL[_unit("reelstore.api")] > LEVEL["backend"]


def test_the_storage_layer_loads_psycopg_only_through_extras_needs() -> None:
    """The Postgres client is an optional extra: no backend module imports it directly, so a store without
    it installed opens, and one that needs it says which extra to install (E014) instead of a traceback."""
    direct = [
        f"{path.relative_to(ROOT)} imports {module}"
        for unit, path in _library()
        if unit == "backend"
        for module in _runtime_imports(ast.parse(path.read_text("utf-8")))
        if module == "psycopg" or module.startswith("psycopg.")
    ]
    assert direct == []
    assert 'needs("psycopg"' in (PKG / "backend" / "postgres.py").read_text("utf-8")
