"""A commit that landed but owes an effect says so: the error names the record that stands, the
operations owed and who settles them, so a caller does not queue the effect again in a new view."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from target import Target, configure, pay_op

from reelstore.api import Store
from reelstore.drain import recovery
from reelstore.errors import EffectFailed, OutcomeUnknown


def test_a_not_sent_effect_is_owed_by_a_commit_that_stands(tmp_path: Path, reserve_port: Callable[[], int]) -> None:
    port = reserve_port()
    base = f"http://127.0.0.1:{port}"
    store = Store.init(tmp_path / "s")
    configure(store.repo.config, base)
    v = store.fork("refund")
    v.effect("http", pay_op(base, "keyed"))
    v.effect("http", pay_op(base, "keyed", 6))
    with pytest.raises(EffectFailed) as err:
        v.commit()
    e = err.value
    head = store.repo.refs["refs/heads/main"].hex()
    assert e.committed == head and e.result.record.hex() == head
    assert e.owed == [o.op for o in e.result.drain.outcomes] and len(e.owed) == 2
    assert e.message.startswith(f"committed as record {head}; 2 effects owed (the commit stands; do not queue")
    assert "did not happen" not in e.message and "reel recover" in e.settled_by
    assert e.keys == {}
    assert e.to_json()["details"]["owed"] == e.owed and e.to_json()["details"]["committed"] == head
    with Target(tmp_path / "ledger", port) as target:
        recovery.recover(store.repo).check()  # the owed effects are settled where they are: once each
        assert target.count("/keyed") == 2


def test_an_unknown_outcome_is_owed_and_settled_by_an_operator(tmp_path: Path) -> None:
    with Target(tmp_path / "ledger") as target:
        store = Store.init(tmp_path / "s")
        configure(store.repo.config, target.url)
        target.fault = "drop-after-append"
        v = store.fork("refund")
        v.effect("http", pay_op(target.url, "blind"))
        with pytest.raises(OutcomeUnknown) as err:
            v.commit()
    e = err.value
    head = store.repo.refs["refs/heads/main"].hex()
    assert e.committed == head and e.owed == e.ops and len(e.owed) == 1
    assert e.message.startswith(f"committed as record {head}; 1 effect owed (the commit stands; do not queue")
    assert e.settled_by.startswith("an operator") and f"reel reconcile {e.owed[0]}" in e.settled_by


def test_a_refused_effect_is_final_and_nothing_is_owed(tmp_path: Path) -> None:
    with Target(tmp_path / "ledger") as target:
        store = Store.init(tmp_path / "s")
        configure(store.repo.config, target.url)
        target.fault = "refuse"
        v = store.fork("refund")
        v.effect("http", pay_op(target.url, "keyed"))
        with pytest.raises(EffectFailed) as err:
            v.commit()
    e = err.value
    assert e.owed == [] and e.committed == store.repo.refs["refs/heads/main"].hex()
    assert ", 1 effect failed for good (the commit stands)" in e.message
    assert "new effect in a new view" in e.next_action
