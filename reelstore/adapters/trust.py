"""Which certificate authorities an outbound HTTPS request trusts: the system trust store, plus the
PEM file the config key `http.trust` (or the environment variable `REEL_HTTP_TRUST`) names — for a
private CA, or a test's own CA. The drain and `reel run`'s pass-through both verify with it."""

from __future__ import annotations

import os
import ssl
from pathlib import Path

from reelstore.backend.config import Config
from reelstore.errors import BadInput

TRUST_KEY = "http.trust"
TRUST_VAR = "REEL_HTTP_TRUST"


def extra_trust(config: Config) -> Path | None:
    """The extra PEM file, if one is configured; E014 if it is not a readable file."""
    value = os.environ.get(TRUST_VAR) or config.get(TRUST_KEY)
    if not value:
        return None
    path = Path(value).expanduser()
    if not path.is_file():
        raise BadInput(f"{TRUST_KEY} / {TRUST_VAR} names {value!r}, which is not a readable PEM file")
    return path


def client_context(config: Config) -> ssl.SSLContext:
    """A verifying TLS context: hostname checked, system trust plus `http.trust`."""
    ctx = ssl.create_default_context()
    extra = extra_trust(config)
    if extra is not None:
        ctx.load_verify_locations(cafile=str(extra))
    return ctx
