"""The store's hold: while held, no effect is admitted and nothing drains (E012, exit 6).

An operator holds a store when something outside looks wrong (a target misbehaving, an unknown
payment under investigation). The hold lives in `.reel/HOLD` (JSON: why, who, when), so every
process sees it, and survives restarts until `reel release`; on a shared store, in the ref
`refs/hold`, so every machine sees it.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from reelstore.backend.state_files import DiskFiles
from reelstore.errors import BadInput, Held, StorageError

if TYPE_CHECKING:
    from reelstore.backend.repo import Repo

FILE = "HOLD"
REF = "refs/hold"
"""On a shared store (one whose refs carry an outbox: every machine's), the hold is this ref, naming a
blob of the same JSON, so a hold made on one machine stops admission and draining on all of them."""


def _shared(repo: Repo) -> bool:
    return bool(getattr(repo.refs, "atomic_outbox", False))


def _shared_raw(repo: Repo) -> bytes | None:
    """The shared hold's JSON (the blob `refs/hold` names), or None when no machine holds the store."""
    from reelstore.objects import Blob

    at = repo.refs.get(REF)
    return None if at is None else repo.objects.get_as(at, Blob).data


@dataclass(frozen=True)
class Hold:
    """Why the store is held, by whom, and since when (ms since the epoch; 0 if unknown)."""

    why: str
    by: str
    time: int

    def to_json(self) -> dict[str, Any]:
        return {"why": self.why, "by": self.by, "time": self.time}


class _Seen:
    """The HOLD file as this store handle last read it: its stat and what it said. Every admission asks
    whether the store is held; a stat that matches answers without opening the file."""

    def __init__(self) -> None:
        self.stamp: tuple[int, int, int, int] | None = None
        self.hold: Hold | None = None


def _seen(_repo: Repo) -> _Seen:
    return _Seen()


def status(repo: Repo) -> Hold | None:
    """The store's hold, or None when it is not held. A HOLD file that is not JSON still holds the
    store (its text is the reason); one that is JSON but not a map is damaged (E007)."""
    if _shared(repo):
        return _parse(repo, _shared_raw(repo))
    root = repo.files.root
    if root is None or not isinstance(repo.files, DiskFiles):  # only a file on disk has a stat to go by
        return _parse(repo, repo.files.read(FILE))
    try:
        st = os.stat(os.path.join(root, FILE))
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StorageError(f"cannot read {repo.files.where(FILE)}: {exc}") from None
    # A hold is written by an atomic replace (a new inode) and removed by unlink: any change shows here.
    stamp = (st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size)
    seen = repo.attached(_seen)
    if seen.stamp != stamp:
        seen.hold, seen.stamp = _parse(repo, repo.files.read(FILE)), stamp
    return seen.hold


def _parse(repo: Repo, raw: bytes | None) -> Hold | None:
    if raw is None:
        return None
    try:
        doc = json.loads(raw)
    except ValueError:
        return Hold(raw.decode("utf-8", "replace").strip() or "(unreadable HOLD file)", "", 0)
    if not isinstance(doc, dict):
        raise StorageError(f"{repo.files.where(FILE)} is damaged")
    when = doc.get("time")
    return Hold(str(doc.get("why", "")), str(doc.get("by") or ""), when if isinstance(when, int) else 0)


def check(repo: Repo) -> None:
    """Raise Held (E012) if the store is held."""
    held = status(repo)
    if held is not None:
        by = f" by {held.by}" if held.by else ""
        raise Held(
            f"the store is on hold{by}: {held.why}; nothing is admitted or drained until `reel release`", why=held.why
        )


def hold(repo: Repo, why: str, by: str = "") -> Hold:
    """Put the store on hold (replacing any earlier reason)."""
    if not why.strip():
        raise BadInput("a hold needs a reason (--why)")
    held = Hold(why, by, int(time.time() * 1000))
    doc = json.dumps(held.to_json(), sort_keys=True).encode("utf-8")
    if _shared(repo):
        from reelstore.objects import Blob

        blob = Blob(doc)
        repo.objects.put(blob)
        repo.refs.set(REF, blob.id, message="hold", principal=by)
    else:
        repo.files.write(FILE, doc)
    return held


def release(repo: Repo) -> Hold | None:
    """Lift the hold; returns the hold that was lifted (None if the store was not held)."""
    held = status(repo)
    if _shared(repo):
        if held is not None:
            repo.refs.delete(REF, message="release")
    else:
        repo.files.remove(FILE)
    return held
