"""Commit claims: the record a `commit --remote` is pushing, noted until the local trunk holds it.

Between the push that wins the remote trunk and the local trunk's move, a crash (or a push whose
answer never came back) leaves a record that may be committed on the remote while it is neither on
the local trunk nor marked as this store's to drain: `reel fetch` would bring it back as another
store's record, and no store would ever send its effects. So the commit writes a claim
(`.reel/claims/<trunk>`: the record, the trunk value it builds on, the view and the remote) before
the push, and removes it once the local trunk holds the record or the remote refused it. A claim left
behind is settled by the next `reel fetch` of that remote (`sync.fetch`): if the remote's trunk holds
the record, the local trunk is moved to it as a commit made here (so `reel recover` drains it);
if not, nothing was committed and the claim goes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from reelstore.errors import BadInput, RemoteRaceLost, StorageError
from reelstore.objects import Hash

if TYPE_CHECKING:
    from reelstore.backend.repo import Repo

PREFIX = "claims/"


@dataclass(frozen=True)
class Claim:
    trunk: str
    record: Hash
    base: Hash
    """The trunk value the record builds on (its parent)."""
    view: str
    remote: str


def _name(trunk: str) -> str:
    return PREFIX + trunk


def read(repo: Repo, trunk: str) -> Claim | None:
    """The trunk's claim, if a `commit --remote` left one (E007 if it cannot be read)."""
    data = repo.files.read(_name(trunk))
    if data is None:
        return None
    try:
        doc = json.loads(data)
        return Claim(
            trunk, Hash.from_hex(doc["record"]), Hash.from_hex(doc["base"]), str(doc["view"]), str(doc["remote"])
        )
    except (ValueError, KeyError, TypeError, BadInput):
        raise StorageError(
            f"{repo.files.where(_name(trunk))} is damaged: it should name the record an interrupted "
            "`commit --remote` pushed; fix it by hand before committing on this trunk",
            trunk=trunk,
        ) from None


def write(repo: Repo, claim: Claim) -> None:
    """Note `claim` durably before its push. E015 if an earlier claim of the trunk is not settled."""
    earlier = read(repo, claim.trunk)
    if earlier is not None:
        raise RemoteRaceLost(
            f"an earlier `commit --remote` on trunk {claim.trunk} (view {earlier.view!r}, record "
            f"{earlier.record.hex()}) did not finish: it may be committed on remote {earlier.remote}. "
            f"`reel fetch {earlier.remote}` settles it first; nothing was committed",
            trunk=claim.trunk,
        )
    doc = {"record": claim.record.hex(), "base": claim.base.hex(), "view": claim.view, "remote": claim.remote}
    repo.files.write(_name(claim.trunk), (json.dumps(doc, sort_keys=True) + "\n").encode())


def clear(repo: Repo, trunk: str) -> None:
    """The claim is settled: the local trunk holds the record, or the remote does not."""
    repo.files.remove(_name(trunk))
