"""Adapters are plugins: a tiny distribution, built here as a wheel and installed with pip, declares an
adapter under the `reelstore.adapters` entry-point group; the `reel` command line loads it. Without
it installed, `effect` and `commit` refuse (E014) with nothing changed, and a drain that cannot load
it journals the effect `not_sent`, which `reel recover` sends once the plugin is back."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from conftest import REEL

from reelstore.adapters.base import Adapter, Admission, Result, register
from reelstore.api import Store
from reelstore.errors import BadInput

PLUGIN = '''
from reelstore.adapters.base import Adapter, Admission, Result


class Tiny(Adapter):
    """Appends one line per effect to the file its op names."""

    name = "tiny"

    def classify(self, op):
        return Admission(f"tiny:{op['note']}", "C", "keyed")

    def fire(self, effect, token, op_id):
        token.consume(effect.id)
        with open(effect.op["file"], "a") as f:
            f.write(f"{op_id} {effect.op['note']}\\n")
        return Result("succeeded", {"op": op_id})
'''


def _wheel(where: Path) -> Path:
    """A real wheel of distribution reel-tiny-adapter 0.1: one module and its entry point."""
    dist = "reel_tiny_adapter-0.1.dist-info"
    files = {
        "reel_tiny_adapter.py": PLUGIN.encode(),
        f"{dist}/METADATA": b"Metadata-Version: 2.1\nName: reel-tiny-adapter\nVersion: 0.1\n",
        f"{dist}/WHEEL": b"Wheel-Version: 1.0\nGenerator: reelstore-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        f"{dist}/entry_points.txt": b"[reelstore.adapters]\ntiny = reel_tiny_adapter:Tiny\n",
    }
    record = []
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
    record.append(f"{dist}/RECORD,,")
    files[f"{dist}/RECORD"] = ("\n".join(record) + "\n").encode()
    path = where / "reel_tiny_adapter-0.1-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
    return path


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory the tiny distribution is pip-installed into; on PYTHONPATH it is "installed"."""
    where = tmp_path_factory.mktemp("plugin")
    target = where / "site"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "--no-index",
            "--quiet",
            "--target",
            str(target),
            str(_wheel(where)),
        ],
        capture_output=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr.decode()
    assert (target / "reel_tiny_adapter-0.1.dist-info" / "entry_points.txt").exists()
    return target


def _reel(cwd: Path, site: Path | None):  # noqa: ANN202
    env = {k: v for k, v in os.environ.items() if k not in ("REEL_DIR", "PYTHONPATH")}
    if site is not None:
        env["PYTHONPATH"] = str(site)

    def call(*args: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run([REEL, *args], capture_output=True, cwd=cwd, env=env, timeout=120)

    return call


def test_an_installed_plugin_adapter_is_used_by_the_command_line(tmp_path: Path, site: Path) -> None:
    reel = _reel(tmp_path, site)
    out = tmp_path / "tiny.log"
    assert reel("init").returncode == 0 and reel("fork", "a").returncode == 0
    made = reel("--json", "effect", "a", "--adapter", "tiny", "--op", json.dumps({"note": "hi", "file": str(out)}))
    assert made.returncode == 0, made.stderr
    assert json.loads(made.stdout)["resource"] == "tiny:hi"
    done = reel("--json", "commit", "a")
    assert done.returncode == 0, done.stderr
    (o,) = json.loads(done.stdout)["drain"]["outcomes"]
    assert o["state"] == "succeeded" and out.read_text() == f"{o['op']} hi\n"


def test_without_the_plugin_effect_and_commit_refuse_and_nothing_changes(tmp_path: Path, site: Path) -> None:
    with_it, without = _reel(tmp_path, site), _reel(tmp_path, None)
    out = tmp_path / "tiny.log"
    op = json.dumps({"note": "hi", "file": str(out)})
    assert with_it("init").returncode == 0 and with_it("fork", "a").returncode == 0
    refused = without("effect", "a", "--adapter", "tiny", "--op", op)
    assert refused.returncode == 6 and b"E014: no adapter named 'tiny' can be loaded" in refused.stderr
    assert b"reelstore.adapters" in refused.stderr
    assert with_it("effect", "a", "--adapter", "tiny", "--op", op).returncode == 0
    store = Store.open(tmp_path)
    head, view = store.repo.refs["refs/heads/main"], store.repo.refs["refs/views/a"]
    refused = without("commit", "a")
    assert refused.returncode == 6, refused.stderr
    assert b"E014: cannot commit view 'a': a pending effect needs adapter 'tiny'" in refused.stderr
    assert b"nothing was committed" in refused.stderr
    store = Store.open(tmp_path)
    assert store.repo.refs["refs/heads/main"] == head and store.repo.refs["refs/views/a"] == view
    assert not out.exists() and store.repo.refs.get("refs/drains/main") is None
    assert with_it("commit", "a").returncode == 0 and out.read_text().endswith(" hi\n")


def test_a_drain_that_cannot_load_the_adapter_journals_not_sent_then_recovers(tmp_path: Path, site: Path) -> None:
    with_it, without = _reel(tmp_path, site), _reel(tmp_path, None)
    out = tmp_path / "tiny.log"
    assert with_it("init").returncode == 0 and with_it("fork", "a").returncode == 0
    op = json.dumps({"note": "x", "file": str(out)})
    assert with_it("effect", "a", "--adapter", "tiny", "--op", op).returncode == 0
    hook = tmp_path / ".reel" / "hooks" / "pre-drain"
    hook.write_text("#!/bin/sh\necho not now >&2\nexit 1\n")
    hook.chmod(0o755)
    held = with_it("commit", "a")
    assert held.returncode == 6 and b"E009" in held.stderr
    hook.unlink()
    lost = without("--json", "recover")
    assert lost.returncode == 9 and json.loads(lost.stderr)["error"]["code"] == "E017"
    (o,) = json.loads(lost.stdout)["drains"][0]["outcomes"]
    assert o["state"] == "not_sent" and "its adapter cannot be loaded here" in o["note"] and not out.exists()
    done = with_it("recover")
    assert done.returncode == 0, done.stderr
    assert out.read_text() == f"{o['op']} x\n"


def test_an_adapter_registered_in_python_only_is_refused_by_the_command_line(tmp_path: Path, reel) -> None:  # noqa: ANN001
    sent: list[str] = []

    class Slack(Adapter):
        name = "slack-test"

        def classify(self, op: dict) -> Admission:  # type: ignore[override]
            return Admission(f"slack:{op['channel']}", "C", "blind")

        def fire(self, effect, token, op_id):  # noqa: ANN001, ANN201
            token.consume(effect.id)
            sent.append(op_id)
            return Result("succeeded", {"ts": "1"})

    register(Slack)
    store = Store.init(tmp_path)
    with store.view("here") as v:
        v.effect("slack-test", {"channel": "ops"})
    assert [o.state for o in v.result.drain.outcomes] == ["succeeded"] and len(sent) == 1
    store.fork("there").effect("slack-test", {"channel": "ops"})
    head = store.repo.refs["refs/heads/main"]
    refused = reel("commit", "there")
    assert refused.returncode == 6 and b"adapter 'slack-test'" in refused.stderr
    assert Store.open(tmp_path).repo.refs["refs/heads/main"] == head and len(sent) == 1
    with pytest.raises(BadInput, match="not an Adapter subclass"):
        register(dict)  # type: ignore[arg-type]


def test_a_commit_of_fs_effects_imports_only_the_fs_adapter(tmp_path: Path) -> None:
    """A verb loads the adapters of the effects it handles: a commit with one fs effect never imports
    the http adapter nor what it needs (urllib3, http.client, email)."""
    script = (
        "import sys\n"
        "from reelstore.api import Store\n"
        f"store = Store.init({str(tmp_path / 's')!r})\n"
        "with store.view('v') as v:\n"
        "    v.effect('fs', {'action': 'write', 'path': 'out/a.txt', 'content': 'hi'})\n"
        "print(v.result.drain.complete if v.result and v.result.drain else None)\n"
        "print(sorted(m for m in ('reelstore.adapters.http', 'urllib3', 'http.client', 'email') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == ["True", "[]"]
    assert (tmp_path / "s" / "out" / "a.txt").read_text() == "hi"
