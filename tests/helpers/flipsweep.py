"""Byte-flip sweeps over a store's files (issue 11): each changed byte must be caught (E007, exit 3),
refused with another clear error, or be harmless; never a re-sent, dropped or mis-reported effect,
never a traceback. Shared by tests/crash/test_flip_sweep.py (sampled, in CI) and bench/bench_flips.py
(exhaustive).

The store holds three blind payments: `a` drained (succeeded), `b` sent and then killed (unknown: it
must never be sent again), `c` committed and killed before its drain (pending: recover must send it
exactly once). It has a live view `d`; objects are packed (one pack per operation; gc packed the
oldest), one stray object is loose, and the journal is the trunk's segment file. For one flip, on a
fresh copy: `fsck`, `ops`, `recover`, `ops` again, in-process; the target's ledger says what was sent.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from click.testing import CliRunner
from target import Target, pay_op

from reelstore.api import Store
from reelstore.backend.repo import Repo
from reelstore.cli.main import cli
from reelstore.maintenance.gc import gc
from reelstore.objects import Blob, Journal, decode

FLIPS = (0x01, 0x20, 0x80)
"""XOR masks: a neighbouring character, a case change, a byte that is not UTF-8."""


def _reel(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[bytes]:
    clean = {k: v for k, v in os.environ.items() if k not in ("REEL_DIR", "REEL_TEST_CRASH_AT")}
    exe = Path(sys.executable).with_name("reel")
    return subprocess.run([str(exe), *args], cwd=cwd, env={**clean, **env}, capture_output=True, timeout=120)


def build(where: Path, target: Target) -> Path:
    """The store described above, in `where`; returns `where`."""
    store = Store.init(where)
    store.repo.config.set("core.fsync", "false")
    store.fork("a").effect("http", pay_op(target.url, "blind", 1))
    store.commit("a")
    gc(Repo.open(where), "now")
    store = Store.open(where)
    store.fork("b").effect("http", pay_op(target.url, "blind", 2))
    killed = _reel(where, "commit", "b", REEL_TEST_CRASH_AT="drain:after-send")
    assert killed.returncode == -9, killed
    store = Store.open(where)
    store.fork("c").effect("http", pay_op(target.url, "blind", 3))
    killed = _reel(where, "commit", "c", REEL_TEST_CRASH_AT="commit:advanced")
    assert killed.returncode == -9, killed
    Store.open(where).fork("d").put("notes.txt", "a live view keeps a loose ref and a reflog\n")
    # A verb's objects go into one pack per operation; objects written outside one (hash-object -w,
    # a fetch) stay loose, so the store has loose objects too.
    Repo.open(where).objects.put_many([Blob(b"a loose object written outside any operation\n")])
    return where


def kinds(store: Path) -> dict[str, list[Path]]:
    """The store's files by kind, as paths relative to `store`."""
    dot = store / ".reel"
    out: dict[str, list[Path]] = {
        "loose-ref": [],
        "reflog": [],
        "journal": [],
        "config": [],
        "pack": [],
        "idx": [],
        "loose": [],
        "verb-log": [],
    }
    for path in sorted((dot / "refs").rglob("*")):
        if path.is_file():
            out["loose-ref"].append(path)
    out["reflog"] = sorted(p for p in (dot / "logs" / "refs").rglob("*") if p.is_file())
    out["verb-log"] = [dot / "logs" / "OPS"]
    out["config"].append(dot / "config")
    out["pack"] = sorted((dot / "objects/pack").glob("*.pack"))
    out["idx"] = sorted((dot / "objects/pack").glob("*.idx"))
    out["journal"] = sorted((dot / "objects" / "journal").rglob("*.seg"))
    repo = Repo.open(store)
    for h in sorted(repo.objects.loose, key=bytes):
        path = Path(repo.objects.loose_path(h))
        kind = "journal" if isinstance(decode(repo.objects.get_raw(h)), Journal) else "loose"
        out[kind].append(path)
    return {k: [p.relative_to(store) for p in v] for k, v in out.items()}


@dataclass
class Observation:
    fsck: int
    ops: int
    listed: list[tuple[str, str]]
    recover: int
    sent: list[int]
    after: list[tuple[str, str]]
    traceback: str = ""


def _invoke(store: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["-C", str(store), *args])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        exc = result.exception
        return -1, "", f"{type(exc).__name__}: {exc}"
    return result.exit_code, result.stdout, result.stderr


def _ops(store: Path) -> tuple[int, list[tuple[str, str]], str]:
    code, out, err = _invoke(store, "ops", "--json")
    if code != 0:
        return code, [], err if code == -1 else ""
    return code, sorted((o["op"], o["state"]) for o in json.loads(out)), ""


def observe(store: Path, target: Target) -> Observation:
    """Run the verbs on `store` (mutating it: recover sends what it owes)."""
    fsck, _, bad1 = _invoke(store, "fsck")
    ops, listed, bad2 = _ops(store)
    before = len(target.ledger())
    recover, _, bad3 = _invoke(store, "recover")
    sent = [e["body"] for e in target.ledger()[before:]]
    amounts = sorted(json.loads(body)["amount"] for body in sent)
    _, after, bad4 = _ops(store)
    bad = "; ".join(b for b in (bad1 if fsck == -1 else "", bad2, bad3 if recover == -1 else "", bad4) if b)
    return Observation(fsck, ops, listed, recover, amounts, after, bad)


@dataclass
class Sweep:
    counts: Counter[tuple[str, str]] = field(default_factory=Counter)
    """(file kind, verdict) -> flips; verdicts: caught (E007 somewhere), refused (another clear error,
    nothing sent), harmless (every answer as without the flip), bad."""
    bad: list[str] = field(default_factory=list)

    def table(self) -> str:
        kinds_ = sorted({k for k, _ in self.counts})
        rows = [f"{'kind':<12} {'flips':>6} {'caught':>7} {'refused':>8} {'harmless':>9} {'bad':>4}"]
        for k in kinds_:
            c = {v: self.counts[(k, v)] for v in ("caught", "refused", "harmless", "bad")}
            rows.append(
                f"{k:<12} {sum(c.values()):>6} {c['caught']:>7} {c['refused']:>8} {c['harmless']:>9} {c['bad']:>4}"
            )
        return "\n".join(rows)


def judge(base: Observation, got: Observation) -> tuple[str, str]:
    """The verdict on one flip, and why if it is bad."""
    if got.traceback:
        return "bad", f"traceback: {got.traceback}"
    if any(s not in base.sent for s in got.sent) or len(got.sent) > len(base.sent):
        return "bad", f"sent {got.sent}, without the flip {base.sent}"
    if got.recover in (0, 7) and got.sent != base.sent:
        return "bad", f"recover exited {got.recover} having sent {got.sent}, not {base.sent}: an owed effect dropped"
    if got.ops == 0 and got.listed != base.listed:
        return "bad", f"ops listed {got.listed}, not {base.listed}"
    if got.recover in (0, 7) and got.after != base.after and got.after:
        return "bad", f"after recover ops listed {got.after}, not {base.after}"
    codes = (got.fsck, got.ops, got.recover)
    if 3 in codes:
        return "caught", ""
    if got.sent == [] and got.recover not in (0, 7):
        return "refused", ""
    if (got.fsck, got.ops, got.recover, got.listed, got.sent) == (
        base.fsck,
        base.ops,
        base.recover,
        base.listed,
        base.sent,
    ):
        return "harmless", ""
    return "bad", f"exit codes {codes}, without the flip {(base.fsck, base.ops, base.recover)}"


def flips(
    files: dict[str, list[Path]], store: Path, stride: int = 1, offset: int = 0
) -> Iterator[tuple[str, Path, int, int]]:
    """(kind, file, byte offset, xor mask): every `stride`-th byte of every file, from `offset`."""
    for kind, paths in files.items():
        for rel in paths:
            size = (store / rel).stat().st_size
            for at in range(offset % max(size, 1), size, stride):
                for mask in FLIPS:
                    yield kind, rel, at, mask


def sample(
    files: dict[str, list[Path]], store: Path, per_kind: int, seed: int = 11
) -> list[tuple[str, Path, int, int]]:
    """`per_kind` flips of each kind, spread over its files and their bytes by a seeded generator (the same
    flips every run)."""
    import random

    rng = random.Random(seed)
    out = []
    for kind, paths in files.items():
        for n in range(per_kind if paths else 0):
            rel = paths[n % len(paths)]
            size = (store / rel).stat().st_size
            out.append((kind, rel, rng.randrange(size), FLIPS[n % len(FLIPS)]))
    return out


def run(
    template: Path, scratch: Path, target: Target, todo: Iterator[tuple[str, Path, int, int]], base: Observation
) -> Sweep:
    """Apply each flip to a fresh copy of `template` and judge what the verbs do."""
    result = Sweep()
    for kind, rel, at, mask in todo:
        shutil.rmtree(scratch, ignore_errors=True)
        shutil.copytree(template, scratch, symlinks=True)
        path = scratch / rel
        os.chmod(path, 0o644)
        data = bytearray(path.read_bytes())
        data[at] ^= mask
        path.write_bytes(bytes(data))
        verdict, why = judge(base, observe(scratch, target))
        result.counts[(kind, verdict)] += 1
        if verdict == "bad":
            result.bad.append(f"{rel} byte {at} ^ {mask:#04x}: {why}")
    return result


def baseline(template: Path, scratch: Path, target: Target) -> Observation:
    shutil.rmtree(scratch, ignore_errors=True)
    shutil.copytree(template, scratch, symlinks=True)
    base = observe(scratch, target)
    assert base.fsck == 0 and base.ops == 0 and base.recover == 7 and base.sent == [3], base
    return base
