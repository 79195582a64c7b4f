"""A fleet of drainers on one shared Postgres store: leased claims on the outbox, fenced writes, takeover.

This package loads the Postgres client only in the modules that talk to the database (`outbox`,
`worker`), and only a shared store loads them: a store of its own never needs the client installed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from reelstore.backend.repo import Repo


def database(repo: Repo) -> str | None:
    """The URL of the shared database this store lives in, or None for a store of its own."""
    return repo.config.get("core.backend") or None
