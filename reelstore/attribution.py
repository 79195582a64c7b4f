"""Who acts and when: the principal and the clock every record, reflog entry and log line carries."""

from __future__ import annotations

import os
import time


def now_ms() -> int:
    """Wall-clock time in milliseconds since the epoch."""
    return int(time.time() * 1000)


_LOGIN_VARIABLES = ("LOGNAME", "USER", "LNAME", "USERNAME")
"""Where the login name is looked for first, in getpass.getuser's order."""


def principal(configured: str | None = None) -> str:
    """Who acts: REEL_PRINCIPAL, else `configured` (a store's `user.name`, which `Repo.principal`
    passes), else the login name, found as getpass.getuser finds it (the environment, then the
    password database) without importing getpass, which loads termios for its password prompt.
    Whitespace runs become one space, so the name stays one field of a reflog line."""
    who = os.environ.get("REEL_PRINCIPAL") or configured
    who = who or next((os.environ[v] for v in _LOGIN_VARIABLES if os.environ.get(v)), None)
    if not who:
        import pwd

        try:
            who = pwd.getpwuid(os.getuid()).pw_name
        except KeyError:
            who = ""
    return " ".join(who.split()) or "unknown"
