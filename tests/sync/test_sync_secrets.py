"""Secrets that travel: machine A captures an effect that needs a credential and pushes; machine B, a
clone, commits it and sends it with the credential from the secret backend its config names
(`secrets.backend = env` or `file:/DIR`), never from A's `.reel/secrets`. Without the secret, B's
effect is not sent, and the message names where the secret was looked for."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from conftest import REEL
from gitserver import bare
from target import Target, configure, pay_op

from reelstore import sync
from reelstore.api import Store
from reelstore.backend.secrets import env_name, secret_store
from reelstore.errors import BadInput

TOKEN = "Bearer sk-live-4f1c9a7e"


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "REEL_DIR" and not k.startswith("REEL_SECRET_")}
    return {**env, **extra}


def _hand_off(tmp_path: Path, target: Target, header: object, backend: str) -> Path:
    """A captures a blind pay effect carrying `header` as its Authorization and pushes the view; B
    clones (its config naming `backend`) and is returned. Nothing has been sent yet."""
    remote = bare(tmp_path / "shared.git")
    a = Store.init(tmp_path / "a")
    configure(a.repo.config, target.url)
    a.repo.config.set("secrets.backend", backend)
    sync.add_remote(a.repo, "origin", str(remote))
    a.fork("pay").effect("http", {**pay_op(target.url, "blind"), "headers": {"Authorization": header}})
    sync.push(a.repo, "origin")
    b, _ = sync.clone(str(remote), tmp_path / "b")
    configure(b.config, target.url)
    b.config.set("secrets.backend", backend)
    kept_at_b = tmp_path / "b" / ".reel" / "secrets"
    assert not kept_at_b.exists() or not any(kept_at_b.iterdir())  # nothing of A's secrets came along
    assert target.requests == 0
    return tmp_path / "b"


def _commit(where: Path, **env: str) -> tuple[int, dict, str]:
    proc = subprocess.run(
        [REEL, "--json", "commit", "pay"], cwd=where, env=_env(**env), capture_output=True, timeout=60
    )
    return proc.returncode, json.loads(proc.stdout or b"{}"), proc.stderr.decode()


def test_a_named_secret_is_read_from_the_environment_of_the_machine_that_sends(tmp_path: Path) -> None:
    with Target(tmp_path / "ledger.jsonl") as target:
        b = _hand_off(tmp_path, target, {"$secret": "stripe"}, "env")
        assert env_name("stripe") == "REEL_SECRET_STRIPE"
        rc, doc, err = _commit(b, REEL_SECRET_STRIPE=TOKEN)
        assert rc == 0, err
        assert doc["remote"] == "origin" and [o["state"] for o in doc["drain"]["outcomes"]] == ["succeeded"]
        assert target.authorizations == [TOKEN]
        assert target.count("/blind") == 1


def test_without_the_secret_the_effect_is_not_sent_and_the_message_names_it(tmp_path: Path) -> None:
    with Target(tmp_path / "ledger.jsonl") as target:
        b = _hand_off(tmp_path, target, {"$secret": "stripe"}, "env")
        rc, doc, err = _commit(b)
        assert rc == 9, err  # committed, but an effect was not sent (E017)
        [outcome] = doc["drain"]["outcomes"]
        assert outcome["state"] == "not_sent"
        assert "REEL_SECRET_STRIPE" in outcome["note"] and "nothing was sent" in outcome["note"], outcome
        assert target.requests == 0 and target.ledger() == []

        # once the secret is there, `reel recover` sends it (it was never sent)
        proc = subprocess.run(
            [REEL, "recover"], cwd=b, env=_env(REEL_SECRET_STRIPE=TOKEN), capture_output=True, timeout=60
        )
        assert proc.returncode == 0, proc.stderr.decode()
        assert target.authorizations == [TOKEN] and target.count("/blind") == 1


def test_a_scrubbed_credential_travels_through_a_shared_file_backend(tmp_path: Path) -> None:
    """A raw Authorization value is scrubbed at capture into the shared directory (not A's
    `.reel/secrets`); B, reading the same directory, sends it."""
    shared = tmp_path / "vault"
    shared.mkdir(mode=0o700)
    with Target(tmp_path / "ledger.jsonl") as target:
        b = _hand_off(tmp_path, target, TOKEN, f"file:{shared}")
        kept = list(shared.iterdir())
        assert len(kept) == 1 and kept[0].read_text() == TOKEN and kept[0].stat().st_mode & 0o777 == 0o600
        local = tmp_path / "a" / ".reel" / "secrets"
        assert not local.exists() or [p.name for p in local.iterdir()] == [".key"]
        rc, doc, err = _commit(b)
        assert rc == 0, err
        assert target.authorizations == [TOKEN]

        # the same hand-off to a machine without the directory: not sent, naming the file looked for
        kept[0].unlink()
        store = Store.open(b)
        store.fork("again").effect("http", {**pay_op(target.url, "blind"), "headers": {"Authorization": TOKEN}})
        [name] = [p.name for p in shared.iterdir()]
        (shared / name).unlink()
        res = store.commit("again", remote="origin", check=False)
        [outcome] = res.drain.outcomes
        assert outcome.state == "not_sent" and str(shared / name) in outcome.note, outcome
        assert target.authorizations == [TOKEN]


def test_the_backend_setting_is_checked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store.init(tmp_path / "s")
    for bad in ("vault", "file:relative/dir", "file:"):
        store.repo.config.set("secrets.backend", bad)
        with pytest.raises(BadInput, match="secrets.backend") as caught:
            secret_store(store.repo).get("stripe")
        assert caught.value.details["field"] == "secrets.backend"
    store.repo.config.set("secrets.backend", "local")
    store.secrets.put("stripe", "local value")
    store.repo.config.set("secrets.backend", "env")
    assert store.secrets.get("stripe") == "local value"  # the env has none: the local store answers
    monkeypatch.setenv("REEL_SECRET_STRIPE", "shared value")
    assert store.secrets.get("stripe") == "shared value"  # the backend is read first
    store.secrets.put("other", "x")  # env takes no writes: kept locally
    assert (tmp_path / "s" / ".reel" / "secrets" / "other").read_text() == "x"
