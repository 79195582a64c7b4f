"""Service rules: the read class and the built-in model rules, declared and replaced by config."""

from __future__ import annotations

import pytest

from reelstore.errors import BadInput
from reelstore.storage import service_rules as sr
from reelstore.storage.repo import Repo


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
