"""Service rules: the read class and the built-in model rules, declared and replaced by config."""

from __future__ import annotations

import pytest

from reelstore.backend import service_rules as sr
from reelstore.backend.repo import Repo
from reelstore.errors import BadInput


def test_builtin_model_paths_are_read_like_and_other_routes_are_not() -> None:
    cfg = Repo.memory().config
    assert sr.classify(cfg, "http:POST:https://api.openai.com/v1/chat/completions", "POST").read_like
    assert sr.classify(cfg, "http:POST:https://api.anthropic.com/v1/messages", "POST").read_like
    assert not sr.classify(cfg, "http:POST:https://api.openai.com/v1/files", "POST").read_like
    assert not sr.classify(cfg, "http:POST:http://127.0.0.1:8000/v1/chat/completions", "POST").read_like


def test_a_local_model_server_is_read_like_path_by_path() -> None:
    cfg = Repo.memory().config
    extra = sr.model_rules("http://127.0.0.1:8000/")
    assert sr.classify(cfg, "http:POST:http://127.0.0.1:8000/v1/chat/completions", "POST", extra).read_like
    assert not sr.classify(cfg, "http:POST:http://127.0.0.1:8000/refund", "POST", extra).read_like


def test_a_configured_rule_replaces_a_builtin_of_its_name_and_read_is_a_class() -> None:
    repo = Repo.memory()
    repo.config.set("service.openai-v1-chat-completions.match", "http:POST:https://api.openai.com/v1/chat/completions")
    repo.config.set("service.openai-v1-chat-completions.class", "C")
    assert not sr.classify(repo.config, "http:POST:https://api.openai.com/v1/chat/completions", "POST").read_like
    repo.config.set("service.search.match", "http:POST:https://search.example/q")
    repo.config.set("service.search.class", "read")
    assert sr.classify(repo.config, "http:POST:https://search.example/q", "POST").read_like
    repo.config.set("service.bad.match", "http:POST:https://x.example/")
    repo.config.set("service.bad.class", "maybe")
    with pytest.raises(BadInput, match="class must be one of B, C or read"):
        sr.services(repo.config)


def test_gemini_methods_match_by_suffix_and_queries_are_not_matched() -> None:
    cfg = Repo.memory().config
    gen = "http:POST:https://generativelanguage.googleapis.com/v1beta/models/gemini-2.0-flash:generateContent"
    assert sr.classify(cfg, gen, "POST").read_like
    assert sr.classify(cfg, gen.replace(":generateContent", ":streamGenerateContent") + "?alt=sse", "POST").read_like
    assert not sr.classify(cfg, gen.replace(":generateContent", ":tuneModel"), "POST").read_like
    assert sr.classify(cfg, "http:POST:https://api.openai.com/v1/chat/completions?x=1", "POST").read_like
    # Ollama's paths are read-like only on a declared model server.
    assert not sr.classify(cfg, "http:POST:https://api.openai.com/api/chat", "POST").read_like
    assert sr.classify(
        cfg, "http:POST:http://127.0.0.1:11434/api/chat", "POST", sr.model_rules("http://127.0.0.1:11434")
    ).read_like


def test_model_origin_is_checked_and_spelled_as_the_proxy_spells_urls() -> None:
    assert sr.model_origin("http://127.0.0.1:8000/") == "http://127.0.0.1:8000"
    assert sr.model_origin("https://models.example:443") == "https://models.example"
    for bad in ("127.0.0.1:8000", "http://127.0.0.1:8000/v1", "ftp://x", "http://h:99999"):
        with pytest.raises(BadInput, match="--model wants an origin"):
            sr.model_origin(bad)


def test_config_services_lists_configured_and_builtin_rules(tmp_path, reel) -> None:
    import json

    reel("init", str(tmp_path / "s"), check=True)
    reel("-C", str(tmp_path / "s"), "config", "service.search.match", "http:POST:https://s.example/q", check=True)
    reel("-C", str(tmp_path / "s"), "config", "service.search.class", "read", check=True)
    doc = json.loads(reel("-C", str(tmp_path / "s"), "--json", "config", "--services", check=True).stdout)
    rules = {r["name"]: r for r in doc["services"]}
    assert rules["search"]["class"] == "read" and not rules["search"]["builtin"]
    assert rules["openai-v1-chat-completions"]["builtin"]
    assert rules["gemini-generateContent"]["suffix"] == ":generateContent"
    text = reel("-C", str(tmp_path / "s"), "config", "--services", check=True).stdout.decode()
    assert "anthropic-v1-messages\thttp:POST:https://api.anthropic.com/v1/messages\tread\t(built-in)" in text
