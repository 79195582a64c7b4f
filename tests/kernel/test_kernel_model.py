"""Random verb sequences against a plain-dict model: commits replay deltas onto a moving trunk exactly
when the three-way rule says so, and the trunk always holds what the model says (no lost delta)."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from reelstore.backend.repo import Repo
from reelstore.errors import Conflict
from reelstore.kernel import verbs as kernel
from reelstore.objects import Record

NAMES = [f"n{i}" for i in range(6)]


def trunk_state(repo: Repo) -> dict[str, bytes]:
    rec = repo.objects.get(repo.refs["refs/heads/main"])
    assert isinstance(rec, Record)
    return {n: repo.objects.get(h).data for n, h in kernel.namespace(repo).items(rec.namespace)}


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_random_verbs_match_a_dict_model(seed: int) -> None:
    rng = random.Random(seed)
    repo = Repo.memory()
    trunk: dict[str, bytes] = {}
    views: dict[str, tuple[dict[str, bytes], dict[str, bytes | None]]] = {}
    for step in range(60):
        verb = rng.choice(["fork", "put", "put", "rm", "commit", "abort"]) if views else "fork"
        if verb == "fork":
            name = f"v{step}"
            kernel.fork(repo, name)
            views[name] = (dict(trunk), {})
            continue
        name = rng.choice(sorted(views))
        base, changes = views[name]
        current = view_state(base, changes)
        if verb == "put":
            path, data = rng.choice(NAMES), bytes([rng.randrange(3)])
            kernel.put(repo, name, path, data)
            changes[path] = data
        elif verb == "rm" and current:
            path = rng.choice(sorted(current))
            kernel.rm(repo, name, path)
            changes[path] = None
        elif verb == "abort":
            kernel.abort(repo, name)
            del views[name]
        elif verb == "commit":
            effective = {k: v for k, v in changes.items() if base.get(k) != v}
            clash = [k for k, v in effective.items() if trunk.get(k) != v and trunk.get(k) != base.get(k)]
            if clash:
                try:
                    kernel.commit(repo, name)
                except Conflict:
                    continue
                raise AssertionError(f"commit of {name} should have conflicted on {clash}")
            kernel.commit(repo, name)
            del views[name]
            for k, v in effective.items():
                if v is None:
                    trunk.pop(k, None)
                else:
                    trunk[k] = v
            assert trunk_state(repo) == trunk
        if name in views:
            assert {n: kernel.get(repo, name, n) for n, _ in kernel.ls(repo, name)} == view_state(base, changes)


def view_state(base: dict[str, bytes], changes: dict[str, bytes | None]) -> dict[str, bytes]:
    out = dict(base)
    for k, v in changes.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = v
    return out
