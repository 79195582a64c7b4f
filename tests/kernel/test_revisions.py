"""git's revision syntax (`~N`, `^`, `@{N}`, `:PATH`, `A..B`) through the one resolver every command uses."""

from __future__ import annotations

import pytest

from reelstore import revisions
from reelstore.api import Store
from reelstore.errors import BadInput, NotFound
from reelstore.objects import Blob, Record


def _trunk_of_three(tmp_path) -> tuple[Store, list[str]]:
    store = Store.init(tmp_path)
    heads = [store.repo.refs["refs/heads/main"].hex()]
    for i in range(2):
        with store.view(f"v{i}") as v:
            v.put("a.txt", f"version {i}\n")
        heads.append(store.repo.refs["refs/heads/main"].hex())
    return store, heads


def test_ancestors_reflog_and_paths(tmp_path):
    store, heads = _trunk_of_three(tmp_path)
    repo = store.repo
    r = lambda text: revisions.resolve(repo, text).hex()  # noqa: E731
    assert r("main") == heads[2] == r("@") == r("main^0") == r("main@{0}")
    assert r("main~1") == r("main^") == r("refs/heads/main~") == heads[1]
    assert r("main~2") == r("main^^") == r("main~1^") == r(heads[2][:10] + "~2") == heads[0]
    assert r("main@{1}") == heads[1] and r("@{2}") == heads[0]
    assert r("main@{1}~1") == heads[0]
    assert r("main:a.txt") == Blob(b"version 1\n").id.hex()
    assert r("main~1:a.txt") == Blob(b"version 0\n").id.hex()
    assert isinstance(repo.objects.get(revisions.resolve(repo, "main")), Record)
    with pytest.raises(NotFound, match="has no parent"):
        r("main~3")
    with pytest.raises(NotFound, match="3 reflog entries"):
        r("main@{3}")
    with pytest.raises(NotFound, match="is not in"):
        r("main:nope")
    for bad in ("main~x", "main^2", "", "main:", "main..main~1", "main@{-1}"):
        with pytest.raises(BadInput):
            r(bad)


def test_ranges(tmp_path):
    store, heads = _trunk_of_three(tmp_path)
    repo = store.repo
    assert revisions.parse_range("a..b") == ("a", "b")
    assert revisions.parse_range("..b") == ("@", "b") and revisions.parse_range("a..") == ("a", "@")
    assert revisions.parse_range("main") is None
    assert [o.id.hex() for o in revisions.in_range(repo, "main~2..main")] == [heads[2], heads[1]]
    assert [o.id.hex() for o in revisions.in_range(repo, "main..main~1")] == []
    assert [o.id.hex() for o in revisions.in_range(repo, "main~1")] == [heads[1], heads[0]]
    with pytest.raises(BadInput, match="symmetric"):
        revisions.parse_range("a...b")


def test_every_command_takes_revisions(run, tmp_path):
    store, heads = _trunk_of_three(tmp_path)
    blob0 = Blob(b"version 0\n").id.hex()
    assert run("cat-file", "-p", "main~1:a.txt").stdout == "version 0\n"
    assert run("cat-file", "-t", "main^").stdout == "record\n"
    assert run("rev-list", "main~2..main").stdout.split() == [heads[2], heads[1]]
    assert run("rev-list", "main", "^main~1").stdout.split() == [heads[2]]
    assert blob0 in run("show", "main~1:a.txt").stdout
    assert run("ls-tree", "main@{1}").exit_code == 0
    assert run("update-ref", "refs/heads/old", "main~2").exit_code == 0
    assert store.repo.refs["refs/heads/old"].hex() == heads[0]
    bad = run("cat-file", "-t", "main~9")
    assert bad.exit_code == 4 and bad.stderr.startswith("error: E001:")
