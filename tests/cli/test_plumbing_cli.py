"""The foundation's commands through click's runner and through the installed `reel` in real subprocesses."""

from __future__ import annotations

import io
import json
import os
import re
import select
import subprocess
from pathlib import Path

from conftest import REEL

from reelstore.backend.repo import Repo
from reelstore.objects import ZERO_HEX, Blob, Record, Tree, View

HEX = re.compile(r"[0-9a-f]{64}")


def _blob(run, data: bytes) -> str:
    out = run("hash-object", "-w", "--stdin", input=data)
    assert out.exit_code == 0, out.output
    return out.stdout.strip()


def _record(tmp_path: Path, tag: str) -> str:
    """A record (a trunk's ref must point at one) on top of the trunk's root, stored; its id."""
    repo = Repo.open(tmp_path)
    root = repo.refs["refs/heads/main"]
    rec = Record(root, repo.objects.get_as(root, Record).namespace, message=tag)
    repo.objects.put(rec)
    return rec.id.hex()


def _view(tmp_path: Path) -> str:
    repo = Repo.open(tmp_path)
    root = repo.refs["refs/heads/main"]
    view = View("refs/heads/main", root, repo.objects.get_as(root, Record).namespace)
    repo.objects.put(view)
    return view.id.hex()


def _ref(tmp_path: Path, name: str) -> str | None:
    value = Repo.open(tmp_path).refs.get(name)
    return value.hex() if value else None


# hash-object and cat-file


def test_hash_object_and_cat_file_modes(run, tmp_path: Path):
    assert run("init").exit_code == 0
    oid = _blob(run, b"hello\n")
    assert HEX.fullmatch(oid)
    assert oid == Blob(b"hello\n").id.hex()
    assert run("cat-file", "-t", oid).stdout == "blob\n"
    assert run("cat-file", "-s", oid[:6]).stdout == "6\n"
    assert run("cat-file", "-p", oid).stdout == "hello\n"
    assert run("cat-file", "-e", oid).exit_code == 0
    assert run("cat-file", "-e", "f" * 64).exit_code == 4
    missing = run("cat-file", "-p", "0000000f")
    assert missing.exit_code == 4 and missing.stderr.startswith("error: E001:")
    doc = json.loads(run("--json", "cat-file", "-p", "main").stdout)
    assert doc["kind"] == "record" and HEX.fullmatch(doc["object"]["namespace"])
    assert run("cat-file", "-t", "main").stdout == "record\n"


def test_hash_object_without_write_stores_nothing(run, tmp_path: Path):
    run("init")
    out = run("hash-object", "--stdin", input=b"ephemeral")
    assert out.stdout.strip() == Blob(b"ephemeral").id.hex()
    assert run("cat-file", "-e", out.stdout.strip()).exit_code == 4


def test_hash_object_other_kinds_and_bad_bodies(run, tmp_path: Path):
    run("init")
    tree = Tree(0, (("a", Blob(b"x").id),))
    out = run("hash-object", "-t", "tree", "-w", "--stdin", input=tree.content())
    assert out.stdout.strip() == tree.id.hex()
    assert json.loads(run("--json", "cat-file", "-p", tree.id.hex()).stdout)["object"]["entries"][0][0] == "a"
    bad = run("hash-object", "-t", "tree", "-w", "--stdin", input=b"\x81\xa1z\x01")
    assert bad.exit_code == 6 and bad.stderr.startswith("error: E014:")
    err = run("--json", "hash-object", "-t", "record", "--stdin", input=b"\xc0")
    assert err.exit_code == 6 and json.loads(err.stderr)["error"]["code"] == "E014"


def test_hash_object_files_and_stdin_paths(run, tmp_path: Path):
    run("init")
    files = []
    for i in range(3):
        p = tmp_path / f"f{i}"
        p.write_bytes(b"file %d" % i)
        files.append(p)
    out = run("hash-object", "-w", str(files[0]), str(files[1])).stdout.split()
    assert out == [Blob(b"file 0").id.hex(), Blob(b"file 1").id.hex()]
    out = run("hash-object", "-w", "--stdin-paths", input="\n".join(map(str, files)) + "\n").stdout.split()
    assert out[2] == Blob(b"file 2").id.hex()
    assert run("hash-object", "--stdin", "--stdin-paths", input="x\n").exit_code == 2
    assert run("hash-object").exit_code == 2


def test_cat_file_batch_formats(run, tmp_path: Path, read_path: str):
    run("init")
    a = _blob(run, b"alpha")
    b = _blob(run, b"")
    out = run("cat-file", "--batch", input=f"{a}\nnope\n{b[:8]}\n{'e' * 64}\n").stdout_bytes
    assert out == (
        f"{a} blob 5\n".encode()
        + b"alpha\n"
        + b"nope missing\n"
        + f"{b} blob 0\n".encode()
        + b"\n"
        + f"{'e' * 64} missing\n".encode()
    )
    check = run("cat-file", "--batch-check", input=f"{a}\n").stdout
    assert check == f"{a} blob 5\n"
    every = run("cat-file", "--batch-check", "--batch-all-objects").stdout.splitlines()
    assert len(every) == len(set(Repo.open(tmp_path).objects)) >= 4
    assert every == sorted(every)
    blobs = [Blob(b"%d" % i) for i in range(999)]
    Repo.open(tmp_path).objects.put_many(blobs)
    prefixes = [b.id.hex()[:4] for b in blobs]
    shared = next(p for i, p in enumerate(prefixes) if p in prefixes[:i])
    odd = run("cat-file", "--batch-check", input=f"{shared}\nrefs/heads/a..b\n").stdout
    assert odd == f"{shared} ambiguous\nrefs/heads/a..b missing\n"
    docs = json.loads(run("--json", "cat-file", "--batch", input=f"{a}\nnope\n").stdout)
    assert docs[0]["size"] == 5 and docs[1] == {"name": "nope", "missing": True}


# update-ref


def test_update_ref_cas(run, tmp_path: Path):
    run("init")
    a, b = _record(tmp_path, "a"), _record(tmp_path, "b")
    assert run("update-ref", "-m", "create x", "refs/heads/x", a, ZERO_HEX).exit_code == 0
    stale = run("update-ref", "refs/heads/x", b, b)
    assert stale.exit_code == 5 and stale.stderr.startswith("error: E002:")
    assert _ref(tmp_path, "refs/heads/x") == a
    exists = run("update-ref", "refs/heads/x", b, "")
    assert exists.exit_code == 5
    doc = json.loads(run("--json", "update-ref", "x", b[:10], a).stdout)
    assert doc == {"ref": "refs/heads/x", "old": a, "new": b}
    assert run("update-ref", "refs/heads/y", "x").exit_code == 0
    assert _ref(tmp_path, "refs/heads/y") == b
    assert run("update-ref", "-d", "refs/heads/x", a).exit_code == 5
    assert run("update-ref", "-d", "x", b).exit_code == 0
    assert _ref(tmp_path, "refs/heads/x") is None
    assert run("update-ref", "-d", "refs/heads/never").exit_code == 0
    assert run("update-ref", "refs/heads/z", "f" * 64).exit_code == 4
    assert run("update-ref", "refs/heads/a..b", a).exit_code == 6
    assert run("update-ref", "shortname", a).exit_code == 6
    assert run("update-ref", "refs/heads/x").exit_code == 2


def test_update_ref_refuses_a_target_of_the_wrong_kind(run, tmp_path: Path):
    """Finding 8 of issue 11: a trunk holds a record, a view ref a view, a drain ref a journal entry."""
    run("init")
    blob, view, rec = _blob(run, b"a"), _view(tmp_path), _record(tmp_path, "r")
    for name, target in (
        ("refs/heads/x", blob),
        ("refs/heads/x", view),
        ("refs/views/v", rec),
        ("refs/drains/main", rec),
    ):
        out = run("update-ref", name, target)
        assert out.exit_code == 6 and "must point at a" in out.stderr, (name, out.output)
        assert _ref(tmp_path, name) is None
    out = run("update-ref", "--stdin", input=f"create refs/heads/ok {rec}\ncreate refs/views/bad {blob}\n")
    assert out.exit_code == 6 and _ref(tmp_path, "refs/heads/ok") is None
    assert run("update-ref", "refs/views/v", view).exit_code == 0
    assert run("update-ref", "refs/remotes/o/anything", blob).exit_code == 0


def test_update_ref_stdin_is_all_or_nothing(run, tmp_path: Path):
    run("init")
    a, b = _record(tmp_path, "a"), _record(tmp_path, "b")
    main = _ref(tmp_path, "refs/heads/main")
    bad = run("update-ref", "--stdin", input=f"create refs/heads/p {a}\nupdate main {b} {a}\n")
    assert bad.exit_code == 5
    assert _ref(tmp_path, "refs/heads/p") is None and _ref(tmp_path, "refs/heads/main") == main
    good = run("update-ref", "--stdin", input=f"create refs/heads/p {a}\nupdate main {b} {main}\nverify refs/heads/q\n")
    assert good.exit_code == 0, good.output
    assert _ref(tmp_path, "refs/heads/p") == a and _ref(tmp_path, "refs/heads/main") == b
    script = f"start\ndelete refs/heads/p {a}\ncreate refs/heads/q {b}\nprepare\ncommit\n"
    out = run("update-ref", "--stdin", input=script)
    assert out.stdout == "start: ok\nprepare: ok\ncommit: ok\n"
    assert _ref(tmp_path, "refs/heads/p") is None and _ref(tmp_path, "refs/heads/q") == b
    out = run("update-ref", "--stdin", input=f"start\ncreate refs/heads/r {a}\nabort\n")
    assert out.stdout == "start: ok\nabort: ok\n" and _ref(tmp_path, "refs/heads/r") is None
    out = run("update-ref", "--stdin", input=f"start\ncreate refs/heads/r {a}\n")
    assert out.exit_code == 0 and _ref(tmp_path, "refs/heads/r") is None
    out = run("update-ref", "--stdin", input=f"start\ncreate refs/heads/r {a}\ncommit\ncreate refs/heads/s {a}\n")
    assert out.exit_code == 6 and _ref(tmp_path, "refs/heads/r") == a and _ref(tmp_path, "refs/heads/s") is None
    for junk in ("frobnicate refs/heads/x\n", f"create refs/heads/t {a} extra\n", f"update refs/heads/t {a}\nbogus\n"):
        out = run("update-ref", "--stdin", input=junk)
        assert out.exit_code == 6 and _ref(tmp_path, "refs/heads/t") is None
    doc = json.loads(run("--json", "update-ref", "--stdin", input=f"update refs/heads/q {a} {b}\n").stdout)
    assert doc["updated"] == [{"ref": "refs/heads/q", "old": b, "new": a}]
    assert not list(tmp_path.glob(".reel/refs/**/*.lock"))


def test_update_ref_reports_a_stale_lock(run, tmp_path: Path):
    run("init")
    a = _record(tmp_path, "a")
    main = _ref(tmp_path, "refs/heads/main")
    (tmp_path / ".reel/refs/heads/main.lock").write_bytes(b"")
    out = run("update-ref", "main", a, main)
    assert out.exit_code == 5 and "main.lock" in out.stderr
    assert _ref(tmp_path, "refs/heads/main") == main


# show-ref, for-each-ref, reflog


def test_show_ref_and_for_each_ref(run, tmp_path: Path):
    run("init")
    a = _view(tmp_path)
    main = _ref(tmp_path, "refs/heads/main")
    run("update-ref", "refs/views/main", a)
    run("update-ref", "refs/views/w/deep", a)
    assert run("show-ref").stdout == f"{main} refs/heads/main\n{a} refs/views/main\n{a} refs/views/w/deep\n"
    assert run("show-ref", "--heads").stdout == f"{main} refs/heads/main\n"
    assert run("show-ref", "main").stdout.count("\n") == 2
    assert run("show-ref", "deep", "--hash").stdout == f"{a}\n"
    assert run("show-ref", "eep").exit_code == 4
    assert run("show-ref", "--verify", "refs/views/main").stdout == f"{a} refs/views/main\n"
    short = run("show-ref", "--verify", "main")
    assert short.exit_code == 6 and "--verify wants refs/" in short.stderr
    assert run("show-ref", "--verify", "-s", "refs/heads/main").stdout == f"{main}\n"
    assert run("show-ref", "-q", "--verify", "refs/heads/main").stdout == ""
    quiet = run("show-ref", "-q", "--verify", "refs/heads/nope")  # as git: nothing printed, the status says it
    assert (quiet.exit_code, quiet.stdout, quiet.stderr) == (4, "", "")
    quiet = run("show-ref", "-q", "zzz")
    assert (quiet.exit_code, quiet.stdout, quiet.stderr) == (4, "", "")
    assert "E001" in run("show-ref", "--verify", "refs/heads/nope").stderr  # not quiet: it says why
    assert run("show-ref", "--abbrev", "8", "refs/heads/main").stdout == f"{main[:8]} refs/heads/main\n"
    assert run("show-ref", "--verify", "refs/views/nope").exit_code == 4
    assert json.loads(run("--json", "show-ref", "--views").stdout)[1] == {"ref": "refs/views/w/deep", "id": a}
    assert run("for-each-ref").stdout.splitlines()[0] == f"{main} record\trefs/heads/main"
    fmt = run("for-each-ref", "--format", "%(refname:short)|%(objecttype)|%(objectname:short)%%", "refs/views")
    assert fmt.stdout == f"views/main|view|{a[:12]}%\nw/deep|view|{a[:12]}%\n"
    glob = run("for-each-ref", "--format", "%(refname)", "refs/*/w/*")
    assert glob.stdout == "refs/views/w/deep\n"
    assert run("for-each-ref", "--format", "%(bogus)").exit_code == 6
    assert run("for-each-ref", "--count", "1", "--format", "%(refname)").stdout == "refs/heads/main\n"
    docs = json.loads(run("--json", "for-each-ref", "refs/heads").stdout)
    assert docs == [{"ref": "refs/heads/main", "short": "main", "id": main, "kind": "record"}]


def test_reflog(run, tmp_path: Path):
    run("init")
    a, b = _record(tmp_path, "a"), _record(tmp_path, "b")
    main = _ref(tmp_path, "refs/heads/main")
    run("update-ref", "-m", "to a", "main", a)
    run("update-ref", "-m", "to b", "main", b)
    lines = run("reflog").stdout.splitlines()
    assert lines == [f"{b[:12]} main@{{0}}: to b", f"{a[:12]} main@{{1}}: to a", f"{main[:12]} main@{{2}}: init"]
    assert run("reflog", "show", "refs/heads/main", "-n", "1").stdout == f"{b[:12]} refs/heads/main@{{0}}: to b\n"
    doc = json.loads(run("--json", "reflog", "main").stdout)
    assert doc["entries"][0]["old"] == a and doc["entries"][2]["old"] is None
    # Every line carries its checksum (an unchecksummed one is damage), so no entry says "verified".
    assert set(doc["entries"][0]) == {"index", "old", "new", "time_ms", "principal", "message"}
    assert "legacy_reflog_lines" not in json.loads(run("--json", "fsck").stdout)
    assert run("reflog", "refs/heads/none").exit_code == 4


# config


def test_config_command(run, tmp_path: Path):
    run("init")
    assert run("config", "core.trunk").stdout == "main\n"
    assert run("config", "user.name", "Ada L").exit_code == 0
    assert run("config", "user.name").stdout == "Ada L\n"
    run("config", "--add", "remote.o.url", "one")
    run("config", "--add", "remote.o.url", "two")
    assert run("config", "--get-all", "remote.o.url").stdout == "one\ntwo\n"
    assert run("config", "remote.o.url").stdout == "two\n"
    assert run("config", "--unset", "remote.o.url").exit_code == 6
    assert run("config", "--unset-all", "remote.o.url").exit_code == 0
    assert run("config", "remote.o.url").exit_code == 4
    assert run("config", "--unset", "remote.o.url").exit_code == 4
    assert "user.name=Ada L" in run("config", "--list").stdout.splitlines()
    assert {"key": "core.trunk", "value": "main"} in json.loads(run("--json", "config", "-l").stdout)
    assert run("config", "nodot").exit_code == 6
    assert run("config").exit_code == 2
    reflog = json.loads(run("--json", "reflog").stdout)["entries"]
    run("update-ref", "refs/heads/p", "main")
    assert json.loads(run("--json", "reflog", "p").stdout)["entries"][0]["principal"] == "Ada L"
    assert reflog


def test_commands_outside_a_store_are_e001(run, tmp_path: Path):
    for args in (("cat-file", "-t", "abcd"), ("show-ref",), ("config", "core.trunk"), ("reflog",)):
        out = run(*args)
        assert out.exit_code == 4 and "E001" in out.stderr


# the acceptance examples through the real `reel`


def test_acceptance_through_real_reel(reel, tmp_path: Path):
    reel("init", check=True)
    oid = reel("hash-object", "-w", "--stdin", input=b"hi\n", check=True).stdout.decode().strip()
    assert HEX.fullmatch(oid)
    assert reel("cat-file", "-p", oid, check=True).stdout == b"hi\n"
    main = _ref(tmp_path, "refs/heads/main")
    rec = _record(tmp_path, "r")
    stale = reel("update-ref", "refs/heads/main", rec, rec)
    assert stale.returncode == 5 and stale.stderr.startswith(b"error: E002:")
    assert _ref(tmp_path, "refs/heads/main") == main
    env = {**os.environ, "REEL_DIR": str(tmp_path / ".reel")}
    elsewhere = subprocess.run([REEL, "cat-file", "-p", oid], cwd="/", env=env, capture_output=True, timeout=60)
    assert elsewhere.stdout == b"hi\n"
    sub = tmp_path / "a" / "b"
    sub.mkdir(parents=True)
    assert reel("cat-file", "-t", oid, cwd=sub, check=True).stdout == b"blob\n"
    assert reel("-C", str(sub), "--json", "cat-file", "-t", oid, check=True).stdout.decode().count("blob") == 1


def test_batch_check_streams_ten_thousand_ids(reel, tmp_path: Path, read_path: str):
    reel("init", check=True)
    blobs = [Blob(b"object %d " % i + bytes(i % 7)) for i in range(10_000)]
    ids = Repo.open(tmp_path).objects.put_many(blobs)
    missing = [f"{i:064x}" for i in range(1, 11)]
    names = [h.hex() for h in ids] + missing
    proc = subprocess.run(
        [REEL, "cat-file", "--batch-check", "--buffer"],
        cwd=tmp_path,
        capture_output=True,
        input="\n".join(names).encode() + b"\n",
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.decode().splitlines()
    assert len(lines) == len(names)
    for blob, line in zip(blobs, lines):
        assert line == f"{blob.id.hex()} blob {len(blob.data)}"
    assert lines[len(blobs) :] == [f"{m} missing" for m in missing]
    some = "\n".join(h.hex() for h in ids[:50]).encode() + b"\n"
    full = subprocess.run([REEL, "cat-file", "--batch"], cwd=tmp_path, capture_output=True, input=some, timeout=60)
    expected = b"".join(f"{b.id.hex()} blob {len(b.data)}\n".encode() + b.data + b"\n" for b in blobs[:50])
    assert full.stdout == expected


def test_batch_answers_each_name_before_reading_the_next(reel, tmp_path: Path, read_path: str):
    """Driven one name at a time, `cat-file --batch` answers (flushes) before it waits for more input."""
    reel("init", check=True)
    blobs = [Blob(b"interactive %d" % i) for i in range(3)]
    Repo.open(tmp_path).objects.put_many(blobs)
    proc = subprocess.Popen([REEL, "cat-file", "--batch"], cwd=tmp_path, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        for blob in [*blobs, Blob(b"absent")]:
            proc.stdin.write(blob.id.hex().encode() + b"\n")
            proc.stdin.flush()
            assert select.select([proc.stdout], [], [], 30)[0], "no answer within 30 s"
            head = proc.stdout.readline()
            if blob.data.startswith(b"interactive"):
                assert head == f"{blob.id.hex()} blob {len(blob.data)}\n".encode()
                assert proc.stdout.read(len(blob.data) + 1) == blob.data + b"\n"
            else:
                assert head == f"{blob.id.hex()} missing\n".encode()
    finally:
        proc.stdin.close()
        assert proc.wait(timeout=30) == 0


class _TrickleFile(io.RawIOBase):
    """A raw file that takes at most three bytes a write, as a raw stdout may take fewer than given."""

    def __init__(self) -> None:
        self.got = bytearray()

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:  # type: ignore[override]
        self.got += bytes(data[:3])
        return min(3, len(data))


def test_content_goes_out_whole_through_a_raw_stdout_that_writes_fewer() -> None:
    """Under PYTHONUNBUFFERED stdout is a raw file: cat-file's writes must loop until every byte is out."""
    from reelstore.cli.context import every_byte

    out = _TrickleFile()
    data = bytes(range(256)) * 5
    every_byte(out)(data)
    every_byte(out)(memoryview(b"tail"))
    assert bytes(out.got) == data + b"tail"
