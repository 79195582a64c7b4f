"""`store.config`: the same keys, parser and checks as `reel config`, and docs/config.md names every
key the code reads."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from reelstore.adapters.http import HttpAdapter
from reelstore.api import Store
from reelstore.errors import BadInput, NotFound

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "config.md"


def test_a_store_opened_earlier_neither_misses_nor_undoes_a_later_reel_config(tmp_path: Path, reel) -> None:  # noqa: ANN001
    store = Store.init(tmp_path / "s")
    assert reel("config", "http.timeout", "9", cwd=tmp_path / "s").returncode == 0
    assert store.config["http.timeout"] == "9"
    store.config["hooks.timeout"] = "5"
    assert Store.open(tmp_path / "s").config.get("http.timeout") == "9"


def test_code_and_command_line_read_and_write_the_same_keys(tmp_path: Path, reel) -> None:  # noqa: ANN001
    store = Store.init(tmp_path / "s")
    store.config["http.timeout"] = "7"
    got = reel("config", "--get", "http.timeout", cwd=tmp_path / "s")
    assert got.returncode == 0 and got.stdout.decode().strip() == "7"
    assert HttpAdapter(Store.open(tmp_path / "s").repo).timeout == 7.0
    assert reel("config", "service.pay.match", "http:POST:https://pay.example.com/", cwd=tmp_path / "s").returncode == 0
    assert store.config["service.pay.match"] == "http:POST:https://pay.example.com/"
    assert "service.pay.match" in store.config and "http.trust" not in store.config
    assert store.config.get("http.trust") is None
    with pytest.raises(NotFound, match="http.trust"):
        store.config["http.trust"]


def test_the_same_checks_refuse_the_same_input(tmp_path: Path, reel) -> None:  # noqa: ANN001
    store = Store.init(tmp_path / "s")
    before = (tmp_path / "s" / ".reel" / "config").read_bytes()
    for key, value in [("nodot", "x"), ("http.time out", "x"), ("http.timeout", "a\x01b")]:
        with pytest.raises(BadInput) as err:
            store.config.set(key, value)
        assert err.value.code == "E014"
        cli = reel("config", key, value, cwd=tmp_path / "s")
        assert cli.returncode == BadInput.exit_status and "E014" in cli.stderr.decode(), (key, cli.stderr)
    assert (tmp_path / "s" / ".reel" / "config").read_bytes() == before
    store.config.add("secrets.header", "x-one")
    store.config.add("secrets.header", "x-two")
    assert store.config.get_all("secrets.header") == ["x-one", "x-two"]
    with pytest.raises(BadInput, match="2 values"):
        store.config.unset("secrets.header")
    assert store.config.unset_all("secrets.header") == 2
    assert store.config.items() == Store.open(tmp_path / "s").config.items()
    with pytest.raises(NotFound):
        store.config.unset("secrets.header")


def test_a_bad_value_is_reported_naming_its_key_where_it_is_used(tmp_path: Path) -> None:
    store = Store.init(tmp_path / "s")
    store.config["http.timeout"] = "soon"
    with pytest.raises(BadInput, match="http.timeout"):
        HttpAdapter(store.repo)


def _keys_in_code() -> set[str]:
    """Every literal config key the library reads (a `{...}` part stands for a name)."""
    found: set[str] = set()
    pattern = re.compile(r"""config\.(?:get|get_all|get_bool)\(\s*f?["']([A-Za-z0-9_.{}-]+)["']""")
    for path in (ROOT / "reelstore").rglob("*.py"):
        text = path.read_text("utf-8")
        found.update(pattern.findall(text))
        found.update(re.findall(r"""config_cutoff\(\s*repo,\s*["']([A-Za-z.]+)["']""", text))
        found.update(re.findall(r"""\(\s*"(pack\.[a-z]+)",\s*"[a-z]+"\)""", text))
    found.update(re.findall(r'TRUST_KEY = "([a-z.]+)"', (ROOT / "reelstore/adapters/trust.py").read_text()))
    found.update(
        f"service.NAME.{k}"
        for k in re.findall(r'get\("([a-z-]+)"', (ROOT / "reelstore/backend/service_rules.py").read_text())
    )
    return {re.sub(r"\{[^}]*\}", "NAME", k) for k in found if "." in k and not k.endswith("{key}")}


def test_the_doc_lists_every_key_the_code_reads() -> None:
    documented = {k.lower() for k in re.findall(r"^\| `([A-Za-z0-9_.-]+)` \|", DOC.read_text(), re.M)}
    read = {k.lower() for k in _keys_in_code()}
    assert len(read) >= 25
    assert read - documented == set()
    assert documented - read == set()


def test_the_doc_example_runs(tmp_path: Path) -> None:
    Store.init(tmp_path / "shop")
    code = re.search(r"```python\n(.*?)```", DOC.read_text(), re.S)
    assert code is not None
    proc = subprocess.run([sys.executable, "-c", code.group(1)], cwd=tmp_path, capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stdout.decode().splitlines() == ["None", "10"]
    store = Store.open(tmp_path / "shop")
    assert store.config.get("http.timeout") is None and store.config.get("service.pay.delivery") == "keyed"
