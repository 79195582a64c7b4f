"""How old is old: gc's ages (`now`, `2.weeks.ago`, an ISO time) read as cutoff times, and the defaults
the config overrides."""

from __future__ import annotations

import re
import time

from reelstore.backend.repo import Repo
from reelstore.errors import BadInput

DEFAULT_PRUNE_EXPIRE = "2.weeks.ago"
DEFAULT_REFLOG_EXPIRE = "90.days.ago"

_UNITS = {
    "s": 1,
    "sec": 1,
    "secs": 1,
    "second": 1,
    "seconds": 1,
    "m": 60,
    "min": 60,
    "mins": 60,
    "minute": 60,
    "minutes": 60,
    "h": 3600,
    "hour": 3600,
    "hours": 3600,
    "d": 86400,
    "day": 86400,
    "days": 86400,
    "w": 604800,
    "week": 604800,
    "weeks": 604800,
    "month": 2592000,
    "months": 2592000,
    "y": 31536000,
    "year": 31536000,
    "years": 31536000,
}
_RELATIVE = r"^(\d+)\s*[._ ]?\s*([a-z]+)(?:[._ ]+ago)?$"
"""A count and a unit; compiled (and cached by `re`) only when an age other than now or never is read."""


def parse_age(text: str, now: float | None = None) -> float | None:
    """The cutoff time (epoch seconds) AGE names; None for `never`. E014 if AGE is not understood.

    Forms: `now`, `never`, a count and unit (`2.weeks.ago`, `30.minutes`, `1h`, `90 days ago`; units
    s, m/min, h, d, w, month = 30 days, y = 365 days), or an ISO 8601 time (UTC unless it says otherwise).
    """
    now = time.time() if now is None else now
    t = text.strip().lower()
    if t == "now":
        return now
    if t == "never":
        return None
    m = re.match(_RELATIVE, t)
    if m and m.group(2) in _UNITS:
        return now - int(m.group(1)) * _UNITS[m.group(2)]
    from datetime import datetime, timezone  # only for an ISO time

    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise BadInput(
            f"cannot read {text!r} as an age: use now, never, 2.weeks.ago, 30.minutes, 1h or an ISO time"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.timestamp()


def config_cutoff(repo: Repo, key: str, default: str, now: float) -> float | None:
    return parse_age(repo.config.get(key, default) or default, now)
