"""A real `reel commit` is SIGKILLed at each point of the drain; the target's ledger is the oracle.

Points: before the send (intent journaled), after the target acted but before it answered (the target
kills the client, then drops the connection), after the answer but before the outcome is journaled.
Then `reel recover` runs: keyed, queryable and two-phase effects end exactly once on the ledger;
a blind one is never on it more than once, stays unknown and recovery exits 7. The negative control
forgets the journal before recovering and shows the same assertion catching the duplicate.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from crashed_drain import crashed_commit, op_state, reel
from target import TIERS, Target, configure, pay_op

from reelstore.api import Store

POINTS = ("before-send", "target-kills", "after-send")


def assert_ledger(tier: str, ledger: int, recover_rc: int, state: str) -> None:
    """The tier's promise, judged on the target's own ledger."""
    if tier == "blind":
        assert ledger <= 1, f"blind effect reached the target {ledger} times"
        assert state == "unknown" and recover_rc == 7, (state, recover_rc)
    else:
        assert ledger == 1, f"{tier} effect reached the target {ledger} times"
        assert state == "succeeded" and recover_rc == 0, (state, recover_rc)


@pytest.mark.parametrize("point", POINTS)
@pytest.mark.parametrize("tier", TIERS)
def test_kill_then_recover(tmp_path: Path, tier: str, point: str) -> None:
    with Target(tmp_path / "ledger.jsonl") as target:
        crashed_commit(tmp_path, target, tier, point)
        before = target.count("/")
        assert before == (0 if point == "before-send" else 1)
        assert op_state(tmp_path)["state"] == "unknown"
        rec = reel(tmp_path, "recover")
        doc = op_state(tmp_path)
        assert_ledger(tier, target.count("/"), rec.returncode, doc["state"])
        if tier == "blind":
            assert b"E011" in rec.stderr and b"reel reconcile" in rec.stderr
            again = reel(tmp_path, "recover")
            assert again.returncode == 7 and target.count("/") == before


def test_a_drain_ref_deleted_outright_resends_nothing(tmp_path: Path) -> None:
    """The drain ref deleted (gone, not damaged) after a blind send whose outcome is unknown: the journal's
    segment is its durable record, so recover still sees the intent, keeps the effect unknown (exit 7)
    and sends nothing, and the ref is put back. With the segment gone instead, the ref names entries
    nothing holds: E007, and still nothing is sent."""
    with Target(tmp_path / "ledger.jsonl") as target:
        crashed_commit(tmp_path, target, "blind", "target-kills")
        ref = tmp_path / ".reel" / "refs" / "drains" / "main"
        ref.unlink()  # deleted outright: no older value behind it
        rec = reel(tmp_path, "recover")
        assert_ledger("blind", target.count("/"), rec.returncode, op_state(tmp_path)["state"])
        assert target.count("/") == 1 and b"E011" in rec.stderr and ref.exists()
        (tmp_path / ".reel" / "objects" / "journal" / "main.seg").unlink()
        rec = reel(tmp_path, "recover")
        assert rec.returncode == 3 and b"E007" in rec.stderr, rec.stderr
        assert target.count("/") == 1


def test_a_journal_deleted_whole_is_e007_and_nothing_is_resent(tmp_path: Path) -> None:
    """Segment and drain ref both deleted after a blind send whose outcome is unknown: the trunk's mark
    (`.reel/journals/main`) says it had a journal, so recover refuses with E007 naming what is missing
    instead of taking the effect for unsent; fsck reports it too."""
    with Target(tmp_path / "ledger.jsonl") as target:
        crashed_commit(tmp_path, target, "blind", "target-kills")
        assert (tmp_path / ".reel" / "journals" / "main").is_file()
        (tmp_path / ".reel" / "objects" / "journal" / "main.seg").unlink()
        (tmp_path / ".reel" / "refs" / "drains" / "main").unlink()
        for args in (("recover",), ("recover",), ("ops",)):
            rec = reel(tmp_path, *args)
            assert rec.returncode == 3, rec.stderr
            assert b"E007: the drain journal of trunk main is missing" in rec.stderr, rec.stderr
        assert target.count("/") == 1
        checked = reel(tmp_path, "fsck")
        assert checked.returncode != 0 and b"drain journal of trunk main is missing" in checked.stdout + checked.stderr


def test_negative_control_forgetting_the_journal_duplicates(tmp_path: Path) -> None:
    with Target(tmp_path / "ledger.jsonl") as target:
        crashed_commit(tmp_path, target, "blind", "target-kills")
        # The journal is the trunk's segment (its durable record), its high-water mark, the drain ref that
        # follows it and the mark that says the trunk has one; forgotten together, nothing says the effect
        # was ever sent.
        (tmp_path / ".reel" / "objects" / "journal" / "main.seg").unlink()
        (tmp_path / ".reel" / "objects" / "journal" / "main.seg.hwm").unlink()
        (tmp_path / ".reel" / "refs" / "drains" / "main").unlink()
        (tmp_path / ".reel" / "journals" / "main").unlink()
        rec = reel(tmp_path, "recover")
        with pytest.raises(AssertionError, match="reached the target 2 times"):
            assert_ledger("blind", target.count("/"), rec.returncode, op_state(tmp_path)["state"])


def test_commit_not_drained_at_all_is_drained_by_recover(tmp_path: Path) -> None:
    with Target(tmp_path / "ledger.jsonl") as target:
        store = Store.init(tmp_path)
        configure(store.repo.config, target.url)
        store.fork("pay").effect("http", pay_op(target.url, "blind"))
        killed = reel(tmp_path, "commit", "pay", REEL_TEST_CRASH_AT="commit:advanced")
        assert killed.returncode == -9 and target.count("/") == 0
        assert op_state(tmp_path)["state"] == "pending"
        rec = reel(tmp_path, "recover")
        assert rec.returncode == 0, rec.stderr
        assert target.count("/") == 1 and op_state(tmp_path)["state"] == "succeeded"
