"""Issue 11, findings 2, 3 and 8, reproduced against real `reel` processes and a real HTTP target: one
changed byte in the drain ref or in the trunk's reflog must not make recover re-send a blind payment nor
make an owed effect vanish; a ref at the wrong kind of object, or a pack whose objects do not decode,
is caught. Each damage is E007 (exit 3), never a traceback."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from conftest import REEL
from crashed_drain import _env, crashed_commit, reel
from target import Target, configure, pay_op

from reelstore.api import Store
from reelstore.backend.packs.pack_item import PackItem
from reelstore.backend.packs.pack_write import write_pack
from reelstore.backend.refdb.refs import ReflogEntry, checksum
from reelstore.backend.repo import Repo
from reelstore.objects import Blob, Hash


def _refused(cwd: Path, *args: str) -> str:
    out = reel(cwd, *args)
    err = out.stderr.decode()
    assert out.returncode == 3 and "error: E007:" in err and "Traceback" not in err, (args, out)
    return err


def test_a_changed_drain_ref_never_resends_a_blind_payment(tmp_path: Path) -> None:
    """Finding 2 (first found in a packed-refs file, which stores no longer have): one changed byte of
    the drain ref must not make the journal vanish; recover, ops and fsck refuse with E007."""
    with Target(tmp_path / "ledger.jsonl") as target:
        crashed_commit(tmp_path, target, "blind", "after-send")
        assert target.count("/") == 1
        ref = tmp_path / ".reel/refs/drains/main"
        good = ref.read_bytes()
        ref.write_bytes(good[:70] + bytes([good[70] ^ 0x01]) + good[71:])
        assert "ref refs/drains/main is damaged" in _refused(tmp_path, "recover")
        _refused(tmp_path, "ops")
        assert "refs/drains/main" in _refused(tmp_path, "fsck")
        assert target.count("/") == 1
        ref.write_bytes(good)
        out = reel(tmp_path, "recover")
        assert out.returncode == 7 and target.count("/") == 1, out.stderr


def test_changed_commit_mark_in_the_reflog_never_drops_an_owed_effect(tmp_path: Path) -> None:
    """Finding 3: `commit pay` → `gommit pay` in the trunk's reflog once made a pending payment vanish."""
    with Target(tmp_path / "ledger.jsonl") as target:
        store = Store.init(tmp_path)
        configure(store.repo.config, target.url)
        store.fork("pay").effect("http", pay_op(target.url, "blind"))
        killed = reel(tmp_path, "commit", "pay", REEL_TEST_CRASH_AT="commit:advanced")
        assert killed.returncode == -9 and target.count("/") == 0
        log = tmp_path / ".reel/logs/refs/heads/main"
        good = log.read_bytes()
        assert b"\tcommit pay\n" in good
        log.write_bytes(good.replace(b"\tcommit pay\n", b"\tgommit pay\n"))
        assert "reflog of refs/heads/main is damaged at line 2" in _refused(tmp_path, "ops")
        _refused(tmp_path, "recover")
        assert "refs/heads/main" in _refused(tmp_path, "fsck")
        assert target.count("/") == 0
        log.write_bytes(good)
        (op,) = json.loads(reel(tmp_path, "ops", "--json").stdout)
        assert op["state"] == "pending"
        assert reel(tmp_path, "recover").returncode == 0 and target.count("/") == 1


def test_reflog_and_journal_disagreeing_is_reported_not_resolved(tmp_path: Path) -> None:
    """A reflog whose commit mark was changed and re-checksummed (a damage no CRC can see): the journal
    still names the record, so the operation stays listed, and recover and fsck refuse instead of
    dropping or re-sending it."""
    with Target(tmp_path / "ledger.jsonl") as target:
        crashed_commit(tmp_path, target, "blind", "after-send")
        log = tmp_path / ".reel/logs/refs/heads/main"
        forged = []
        for line in log.read_text().splitlines():
            entry = ReflogEntry.parse(line, "refs/heads/main")
            forged.append(
                entry._replace(message=entry.message.replace("commit pay", "gommit pay")).line("refs/heads/main")
            )
        log.write_text("".join(forged))
        (op,) = json.loads(reel(tmp_path, "ops", "--json").stdout)
        assert op["state"] == "unknown"
        assert "does not mark it as committed here" in _refused(tmp_path, "recover")
        assert "does not mark it as committed here" in _refused(tmp_path, "fsck")
        assert target.count("/") == 1


def test_fsck_reports_a_ref_at_the_wrong_kind(tmp_path: Path) -> None:
    """Finding 8: a drain ref at a blob passed fsck, and the journal stopped being reachable."""
    repo = Repo.init(tmp_path)
    blob = Blob(b"not a journal entry")
    repo.objects.put(blob)
    repo.refs.set("refs/drains/main", blob.id, None)
    err = _refused(tmp_path, "fsck")
    assert "ref refs/drains/main points at a blob" in err and "not a journal" in err


def _bad_pack(directory: Path) -> Path:
    """A pack, well formed byte for byte, holding a tree whose body is nil: it hashes, but never decodes."""
    raw = b"tree\0\xc0"
    result = write_pack(directory, [PackItem(Hash.of(raw), raw, 0)], fsync=False)
    return directory / f"{result.name}.pack"


def test_packs_whose_objects_do_not_decode_are_refused(tmp_path: Path) -> None:
    """Finding 8: index-pack stored such a pack, and fsck and verify-pack passed it."""
    Repo.init(tmp_path)
    pack = _bad_pack(tmp_path / "elsewhere")
    stdin = subprocess.run(
        [REEL, "index-pack", "--stdin"],
        cwd=tmp_path,
        env=_env(),
        input=pack.read_bytes(),
        capture_output=True,
        timeout=60,
    )
    assert stdin.returncode == 3 and b"does not decode" in stdin.stderr, stdin
    assert list((tmp_path / ".reel/objects/pack").glob("*.pack")) == []
    planted = _bad_pack(tmp_path / ".reel/objects/pack")
    assert "tree body must be a map" in _refused(tmp_path, "verify-pack", str(planted))
    assert "tree" in _refused(tmp_path, "fsck")


def test_checksum_covers_the_name() -> None:
    assert checksum("refs/drains/main", "x") != checksum("refs/draIns/main", "x")
