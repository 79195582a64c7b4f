"""git-config style configuration: keys, subsections, several values, edits that keep the file's shape."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reelstore.backend import config
from reelstore.backend.config import Config, split_key
from reelstore.errors import BadInput, StorageError


def test_split_key():
    assert split_key("core.trunk") == ("core", None, "trunk")
    assert split_key("Remote.Origin.URL") == ("remote", "Origin", "url")
    assert split_key("service.api.example.com:443.rule") == ("service", "api.example.com:443", "rule")
    for bad in ("core", "core.", ".x", "a b.c", "core.9x"):
        with pytest.raises(BadInput):
            split_key(bad)


def test_set_get_persist(tmp_path: Path):
    path = tmp_path / "config"
    cfg = Config(path)
    cfg.set("core.trunk", "main")
    cfg.set("remote.Origin.url", "file:///x y")
    cfg.set("user.name", " padded ")
    cfg.set("weird.value", 'has # and ; and "quotes" and \\ back')
    again = Config(path)
    assert again.get("core.trunk") == "main"
    assert again.get("CORE.Trunk") == "main"
    assert again.get("remote.Origin.url") == "file:///x y"
    assert again.get("remote.origin.url") is None
    assert again.get("user.name") == " padded "
    assert again.get("weird.value") == 'has # and ; and "quotes" and \\ back'
    assert again.get("missing.key", "dflt") == "dflt"


def test_multi_values_add_and_unset(tmp_path: Path):
    cfg = Config(tmp_path / "config")
    cfg.set("remote.o.url", "a")
    cfg.set("remote.o.url", "b", add=True)
    cfg.set("remote.o.push", "p")
    assert cfg.get_all("remote.o.url") == ["a", "b"]
    assert cfg.get("remote.o.url") == "b"
    cfg.set("remote.o.url", "c")
    assert cfg.get_all("remote.o.url") == ["a", "c"]
    assert cfg.unset("remote.o.url") == 2
    assert cfg.get_all("remote.o.url") == []
    assert Config(tmp_path / "config").get("remote.o.push") == "p"
    assert cfg.unset("remote.o.url") == 0


def test_comments_and_order_survive_edits(tmp_path: Path):
    path = tmp_path / "config"
    path.write_text("# top comment\n[core]\n\ttrunk = main ; inline\n\n[extra]\n\tflag\n")
    cfg = Config(path)
    assert cfg.get("core.trunk") == "main"
    assert cfg.get_bool("extra.flag") is True
    cfg.set("core.fsync", "false")
    text = path.read_text()
    assert text.startswith("# top comment\n[core]\n\ttrunk = main ; inline\n\tfsync = false\n")
    assert cfg.get_bool("core.fsync", True) is False
    assert cfg.items()[:2] == [("core.trunk", "main"), ("core.fsync", "false")]


def test_subsections_and_remove_section(tmp_path: Path):
    cfg = Config(tmp_path / "config")
    cfg.set("remote.a.url", "1")
    cfg.set("remote.b.url", "2")
    cfg.set("remote.a.fetch", "3")
    assert cfg.subsections("remote") == ["a", "b"]
    assert cfg.remove_section("remote", "a") is True
    assert cfg.subsections("remote") == ["b"]
    assert cfg.remove_section("remote", "zz") is False


def test_bad_lines_and_bools_are_e014(tmp_path: Path):
    path = tmp_path / "config"
    path.write_text("[core]\n\t= nokey\n")
    with pytest.raises(BadInput):
        Config(path).get("core.trunk")
    path.write_text("orphan = 1\n")
    with pytest.raises(BadInput):
        Config(path).get("core.trunk")
    path.write_text("[core]\n\tfsync = maybe\n")
    with pytest.raises(BadInput):
        Config(path).get_bool("core.fsync")


def test_memory_config_never_writes(tmp_path: Path):
    cfg = Config(None, "[core]\n\ttrunk = t\n")
    cfg.set("core.trunk", "u")
    assert cfg.get("core.trunk") == "u"
    assert list(tmp_path.iterdir()) == []


def test_odd_subsections_and_values_round_trip(tmp_path: Path):
    path = tmp_path / "config"
    cfg = Config(path)
    cfg.set('remote.a"b\\c.url', "x")
    cfg.set("service.api.example.com:443.rule", "line one\nline\u2028two")
    cfg.set("core.trunk", "main")
    again = Config(path)
    assert again.get('remote.a"b\\c.url') == "x"
    assert again.subsections("remote") == ['a"b\\c']
    assert again.get("service.api.example.com:443.rule") == "line one\nline\u2028two"
    assert again.get("core.trunk") == "main"
    assert again.remove_section("remote", 'a"b\\c') is True
    assert Config(path).get('remote.a"b\\c.url') is None
    for bad in ("a\rb", "bell\x07"):
        with pytest.raises(BadInput):
            cfg.set("core.x", bad)
    with pytest.raises(BadInput):
        cfg.set("remote.a\nb.url", "x")


def test_a_config_that_is_not_utf8_is_a_clear_e007(tmp_path: Path):
    path = tmp_path / "config"
    path.write_bytes(b"[core]\n\ttrunk = ma\xffin\n")
    with pytest.raises(StorageError, match="line 2 is not UTF-8"):
        Config(path)


def test_rename_section_in_one_batched_save(tmp_path: Path):
    path = tmp_path / "config"
    cfg = Config(path)
    cfg.set("remote.origin.url", "/r.git")
    cfg.set("trunk.main.remote", "origin")
    path.write_text(path.read_text().replace("\turl", "\t; kept\n\turl"))
    cfg = Config(path)
    with cfg.batch():
        cfg.set("trunk.main.remote", "up")
        assert Config(path).get("trunk.main.remote") == "origin"  # nothing written inside the batch
        assert cfg.rename_section("remote", "origin", "up") is True
    again = Config(path)
    assert (again.get("remote.up.url"), again.get("remote.origin.url"), again.get("trunk.main.remote")) == (
        "/r.git",
        None,
        "up",
    )
    assert "; kept" in path.read_text()
    assert again.rename_section("remote", "nowhere", "x") is False
    with pytest.raises(BadInput), again.batch():
        again.set("trunk.main.remote", "gone")
        again.set("remote.a\nb.url", "x")
    assert again.get("trunk.main.remote") == "up" and Config(path).get("trunk.main.remote") == "up"


# The patterns the line parser replaced (git-config's grammar as reel reads it): the oracle the
# string-method parser must agree with on every line.
_SECTION_RE = re.compile(r'^\s*\[\s*([A-Za-z0-9.-]+)(?:\s+"((?:[^"\\]|\\.)*)")?\s*\]\s*(?:[;#].*)?$')
_ENTRY_RE = re.compile(r"^\s*([A-Za-z][A-Za-z0-9-]*)\s*(?:=\s*(.*?))?\s*$")
_LINE_CHARS = ' \t\x0b\x0c\r\xa0\u2003[]"\\;#=.-aZk09é\x00'


def _header_by_pattern(line: str) -> tuple[str, str | None] | None:
    m = _SECTION_RE.match(line)
    if m is None:
        return None
    sub = m.group(2)
    return m.group(1).lower(), None if sub is None else re.sub(r"\\(.)", r"\1", sub)


def _entry_by_pattern(line: str) -> tuple[str, str | None] | None:
    m = _ENTRY_RE.match(line)
    return None if m is None else (m.group(1).lower(), m.group(2))


@settings(max_examples=3000)
@given(st.text(alphabet=_LINE_CHARS, max_size=24))
def test_line_parser_agrees_with_the_grammar_patterns(line: str):
    assert config._header(line) == _header_by_pattern(line)
    assert config._entry(line) == _entry_by_pattern(line)


@pytest.mark.parametrize(
    "line",
    [
        "[core]",
        "  [ core ]  ; c",
        "[Core.X-1]#",
        '[remote "a b"]',
        '[remote\t"q\\"x\\\\y"] # c',
        '[r "unterminated]',
        '[r"no space"]',
        '[r "x" ]',
        '[r "x"] y',
        "[]",
        "[ ]",
        '[r "a\\',
        '[r ""]',
        "key",
        "  Key-2 = v ; c  ",
        "k=",
        "k =   ",
        "9k = v",
        "-k",
        "k v",
        "k\u2003=\u2003v\u2003",
        "\xa0[s]\xa0",
        "é = v",
        "k = a = b",
    ],
)
def test_line_parser_edge_cases(line: str):
    assert config._header(line) == _header_by_pattern(line)
    assert config._entry(line) == _entry_by_pattern(line)
