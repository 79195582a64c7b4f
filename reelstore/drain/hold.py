"""The store's hold: while held, no effect is admitted and nothing drains (E012, exit 6).

An operator holds a store when something outside looks wrong (a target misbehaving, an unknown
payment under investigation). The hold lives in `.reel/HOLD` (JSON: why, who, when), so every
process sees it, and survives restarts until `reel release`.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from reelstore.errors import BadInput, Held, StorageError

if TYPE_CHECKING:
    from reelstore.storage.repo import Repo

FILE = "HOLD"


def status(repo: Repo) -> dict[str, Any] | None:
    """The hold's {why, by, time} or None when the store is not held."""
    raw = repo.files.read(FILE)
    if raw is None:
        return None
    try:
        doc = json.loads(raw)
    except ValueError:
        doc = {"why": raw.decode("utf-8", "replace").strip() or "(unreadable HOLD file)", "by": "", "time": 0}
    if not isinstance(doc, dict):
        raise StorageError(f"{repo.files.where(FILE)} is damaged")
    return doc


def check(repo: Repo) -> None:
    """Raise Held (E012) if the store is held."""
    doc = status(repo)
    if doc is not None:
        by = f" by {doc.get('by')}" if doc.get("by") else ""
        raise Held(f"the store is on hold{by}: {doc.get('why', '')}; nothing is admitted or drained until "
                   "`reel release`", why=doc.get("why", ""))


def hold(repo: Repo, why: str, by: str = "") -> dict[str, Any]:
    """Put the store on hold (replacing any earlier reason)."""
    if not why.strip():
        raise BadInput("a hold needs a reason (--why)")
    doc = {"why": why, "by": by, "time": int(time.time() * 1000)}
    repo.files.write(FILE, json.dumps(doc, sort_keys=True).encode("utf-8"))
    return doc


def release(repo: Repo) -> dict[str, Any] | None:
    """Lift the hold; returns the hold that was lifted (None if the store was not held)."""
    doc = status(repo)
    repo.files.remove(FILE)
    return doc
