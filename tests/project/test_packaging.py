"""The sdist is complete: built from this tree, turned into a wheel from the unpacked sdist alone,
installed into a fresh venv, and the smoke tests shipped inside it pass against that install."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(*args: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    proc = subprocess.run([str(a) for a in args], cwd=cwd, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, f"{args} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def test_sdist_installs_in_a_fresh_venv_and_its_tests_pass(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    # From a copy without the checkout's egg-info: a stale SOURCES.txt there (left by `pip install -e`)
    # would add files MANIFEST.in does not, and hide what a clean build lacks.
    tree = tmp_path / "tree"
    shutil.copytree(
        ROOT,
        tree,
        symlinks=True,
        ignore=shutil.ignore_patterns(".git", ".venv", "*.egg-info", "__pycache__", "build", "dist"),
    )
    _run(sys.executable, "-m", "build", "--sdist", "--no-isolation", "--skip-dependency-check", "-o", dist, tree)
    (sdist,) = dist.glob("reelstore-*.tar.gz")
    with tarfile.open(sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
        tar.extractall(tmp_path / "src", filter="data")
    for needed in (
        "LICENSE",
        "README.md",
        "docs/revisions.md",
        "docs/commands/cat-file.md",
        "tests/conftest.py",
        "tests/helpers/gitserver.py",
        "tests/helpers/kernel_helpers.py",
        "reelstore/py.typed",
        "reelstore/cli/main.py",
        "reelstore/plumbing/cat_file.py",
        "reelstore/porcelain/log.py",
    ):
        assert needed in names, f"the sdist lacks {needed}"
    # Everything the shipped tests, docs and benchmarks use: the test suite's helpers (the node client
    # `reel run`'s tests drive, the examples test_examples runs), every docs page, every benchmark.
    shipped = {
        p.relative_to(ROOT).as_posix()
        for top in ("docs", "tests", "examples", "bench")
        for p in (ROOT / top).rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }
    assert sorted(shipped - names) == [], "the sdist lacks these files of the tree"
    assert "Apache License" in (tmp_path / "src" / sdist.name[: -len(".tar.gz")] / "LICENSE").read_text()
    src = tmp_path / "src" / sdist.name[: -len(".tar.gz")]
    _run(sys.executable, "-m", "build", "--wheel", "--no-isolation", "--skip-dependency-check", "-o", dist, src)
    (wheel,) = dist.glob("reelstore-*.whl")
    venv = tmp_path / "venv"
    _run(sys.executable, "-m", "venv", venv)
    py = venv / "bin" / "python"
    # The dependencies come from this environment's site-packages (a plain path entry: its .pth files,
    # among them this checkout's editable install, are not read), so the install needs no network.
    site = Path(_run(py, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))").strip())
    (site / "deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    _run(py, "-m", "pip", "install", "-q", "--no-deps", "--no-index", wheel)
    where = _run(py, "-c", "import reelstore.cli.main as m; print(m.__file__)", cwd=tmp_path).strip()
    assert where.startswith(str(site)), f"reelstore imported from {where}, not the fresh install"
    meta = _run(py, "-c", "from importlib.metadata import metadata; print(metadata('reelstore'))")
    assert "Typing :: Typed" in meta and "Programming Language :: Python :: 3.11" in meta
    env = {k: v for k, v in os.environ.items() if k not in ("REEL_DIR", "PYTHONPATH")}
    # From tests/, so that `python -m` puts no source tree on the path: the installed package is tested.
    out = _run(py, "-m", "pytest", "-p", "no:cacheprovider", "cli/test_smoke.py", cwd=src / "tests", env=env)
    assert re.search(r"\b[1-9][0-9]* passed", out) and "failed" not in out, out
