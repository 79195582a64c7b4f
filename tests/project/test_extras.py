"""The heavy parts are extras: the core install needs neither mcp, h11, cryptography nor httpx, and a
command or module whose extra is missing says which to install, with its code and no traceback.

A missing package is simulated by a module of its name on PYTHONPATH that refuses to import, as an
uninstalled one does; `reel` runs in a real subprocess."""

from __future__ import annotations

import configparser
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _without(tmp_path: Path, *modules: str) -> dict[str, str]:
    blocked = tmp_path / "blocked"
    blocked.mkdir(exist_ok=True)
    for name in modules:
        (blocked / f"{name}.py").write_text("raise ImportError('not installed')\n")
    env = {k: v for k, v in os.environ.items() if k != "REEL_DIR"}
    env["PYTHONPATH"] = str(blocked)
    return env


def _reel(env: dict[str, str], *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(Path(sys.executable).parent / "reel"), *args], cwd=cwd, env=env, text=True, capture_output=True, timeout=60
    )


def test_the_core_install_requires_none_of_the_heavy_parts() -> None:
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    core = {
        line.split(">")[0].split("<")[0].split("=")[0].strip()
        for line in cfg["options"]["install_requires"].split("\n")
        if line.strip()
    }
    assert core & {"mcp", "h11", "cryptography", "httpx", "requests", "pydantic", "psycopg"} == set(), core
    extras = cfg["options.extras_require"]
    assert "mcp" in extras["mcp"] and "h11" in extras["run"] and "cryptography" in extras["run"]
    assert "psycopg" in extras["postgres"] and "postgres" in extras["all"]
    assert "reelstore[all]" in extras["test"]


@pytest.mark.parametrize(
    ("args", "missing", "extra"),
    [
        (("mcp",), ("mcp",), "mcp"),
        (("run", "--", "true"), ("h11",), "run"),
        (("run", "--", "true"), ("cryptography",), "run"),
        (("replay", "nothing", "--", "true"), ("h11",), "run"),
    ],
)
def test_a_command_whose_extra_is_missing_names_it(
    tmp_path: Path, args: tuple[str, ...], missing: tuple[str, ...], extra: str
) -> None:
    env = _without(tmp_path, *missing)
    assert _reel(env, "init", cwd=tmp_path).returncode == 0
    done = _reel(env, *args, cwd=tmp_path)
    assert done.returncode == 6, done.stderr
    assert (
        f"E014: reel {args[0]} needs {missing[0]}, which is not installed: pip install 'reelstore[{extra}]'"
        in done.stderr
    )
    assert "Traceback" not in done.stderr


def test_the_demo_runs_without_any_extra(tmp_path: Path) -> None:
    env = _without(tmp_path, "mcp", "h11", "cryptography", "httpx", "requests")
    done = _reel(env, "demo", "--dir", str(tmp_path / "demo"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "vanished" in done.stdout


def test_http_client_without_httpx_names_the_extra(tmp_path: Path) -> None:
    code = (
        "from reelstore import Store\nfrom reelstore.errors import BadInput\n"
        "v = Store.init('s').fork('a')\n"
        "try:\n    v.http_client()\nexcept BadInput as e:\n    print(e)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=_without(tmp_path, "httpx"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.stdout.strip() == (
        "E014: http_client('httpx') needs httpx, which is not installed: pip install 'reelstore[http]'"
    )
