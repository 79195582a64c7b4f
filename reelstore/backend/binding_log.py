"""The binding log (`.reel/bindings/LOG`): every binding choice of a view lineage, one durable line
`<fork id> remote NAME` or `<fork id> unbound`, beside the file `bindings/<fork id>` that holds the
current one. It is what keeps a pushed view bound when that one file is lost (`kernel.binding`), and
what fsck compares the files with."""

from __future__ import annotations

from reelstore.backend.state_files import StateFiles

LOG = "bindings/LOG"
UNBOUND = "unbound"


def logged(files: StateFiles) -> dict[str, str]:
    """fork id -> the binding the log last records for it (`remote NAME` or `unbound`)."""
    out: dict[str, str] = {}
    for line in (files.read(LOG) or b"").decode("utf-8", "replace").splitlines():
        fork, _, value = line.partition(" ")
        if value == UNBOUND or value.startswith("remote "):
            out[fork] = value
    return out


def missing(files: StateFiles) -> list[str]:
    """A line per binding the log records whose file is gone (the log still binds the view)."""
    return [
        f"binding file bindings/{fork} is missing; the binding log says {value!r}, which still holds"
        for fork, value in sorted(logged(files).items())
        if files.read(f"bindings/{fork}") is None
    ]
