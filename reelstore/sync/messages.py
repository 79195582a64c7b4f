"""The words sync says to a person through its progress callback, in one place (the CLI decides how
to show them; the callback's type, `transport.Progress`, takes one string)."""

from __future__ import annotations

from reelstore.wording import plural


def pushing(count: int, remote: str, commit: str) -> str:
    return f"pushing {plural(count, 'object')} to {remote} in sync commit {commit[:12]}"


def received(count: int, remote: str) -> str:
    return f"received {plural(count, 'object')} from {remote}"


def stale_haves(remote: str, said: str) -> str:
    return (
        f"remote {remote} lacked objects this store believed it held ({said}): a ref was probably "
        "deleted there and the server pruned; forgot what this store knew it had and pushed again in full"
    )
