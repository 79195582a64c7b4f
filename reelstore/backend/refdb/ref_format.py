"""A ref's bytes on disk (the name rules live in objects/ref.py): the CRC that guards every entry, the
ref file's format, and the lines a ref write puts in its lock file and appends to the reflog (their
readers, backend/refdb/ref_locks and backend/refdb/reflog, load only where locks and reflogs are read back).

Everything a reader needs: `show-ref` reads refs through this, the lock files and `backend.refdb.refs`;
the reflog's reader, the lock reader and ref transactions are modules of their own that only their users load.
"""

from __future__ import annotations

import os
import time
import zlib
from collections.abc import Iterable

from reelstore.errors import BadInput, StorageError
from reelstore.objects import ZERO_HEX, Hash
from reelstore.objects.ref import check_ref_name


class AnyValue:
    """The type of ANY."""

    def __repr__(self) -> str:
        return "ANY"


ANY = AnyValue()
"""As an expected old value: no check."""

LOGGED = ("refs/heads/", "refs/views/", "refs/remotes/")


def durable_reflog(name: str) -> bool:
    """A trunk's reflog is fsynced with its ref: it marks the records this store committed and must
    drain. Other reflogs are audit trails gc reads as extra roots; their newest line rides on the ref's
    own durability point (after a power cut it may be missing, the ref never is)."""
    return name.startswith("refs/heads/")


def keeps_reflog(name: str) -> bool:
    """Trunks, views and remote-tracking refs keep a reflog, as git logs only its branch-like refs by
    default. A drain ref does not: its journal entries chain to each other and are their own log."""
    return name.startswith(LOGGED)


_LOWER_HEX = frozenset(b"0123456789abcdef")
_LOOSE_SIZE = 64 + 1 + 8 + 1
"""A loose ref file: `ID CRC` and a newline."""


def checksum(name: str, body: str) -> str:
    """CRC-32 of a ref's name and one entry's text, as 8 lowercase hex digits. It covers the name so an
    entry moved to another ref fails its check; CRC-32 catches every
    error burst up to 32 bits, so any single changed byte of an entry is detected."""
    crc = zlib.crc32(name.encode("utf-8") + b"\0" + body.encode("utf-8"))
    return f"{crc:08x}"


HOST = os.uname().nodename
"""This host's name, as `socket.gethostname()` gives it (read without the socket module: a Class A
write must not touch the network layer, and the audit hook that checks it counts that call)."""


def _boot_id() -> str:
    """This boot's id (Linux), or '' where there is none: with it, a lock's holder found dead is known
    to be a process of this very boot, not one whose pid a reboot has since given to another."""
    try:
        with open("/proc/sys/kernel/random/boot_id", "rb") as f:
            text = f.read(64).decode("ascii", "replace").strip()
    except OSError:
        return ""
    return text if text and all(c in "0123456789abcdef-" for c in text) else ""


BOOT = _boot_id()


def holder_line() -> bytes:
    """What a lock file says about its holder: `pid PID host HOST boot BOOT time SECONDS`. Written here,
    so a ref writer does not load backend/refdb/ref_locks, which reads locks back (a conflict, fsck, gc)."""
    boot = f" boot {BOOT}" if BOOT else ""
    return f"pid {os.getpid()} host {HOST}{boot} time {int(time.time())}\n".encode()


def reflog_body(old: Hash | None, new: Hash | None, time_ms: int, principal: str, message: str) -> str:
    """A reflog line after its CRC: `OLD NEW TIME WHO<tab>MESSAGE`, 64 zeros for "none", the message's
    newlines and the principal's runs of whitespace made single spaces."""
    old_hex = old.hex() if old else ZERO_HEX
    new_hex = new.hex() if new else ZERO_HEX
    msg = message.replace("\n", " ")
    who = " ".join(principal.split())
    return f"{old_hex} {new_hex} {time_ms} {who}\t{msg}"


def reflog_line(name: str, old: Hash | None, new: Hash | None, time_ms: int, principal: str, message: str) -> str:
    """The line a ref write appends to `name`'s reflog: `CRC OLD NEW TIME WHO<tab>MESSAGE` and a newline,
    the CRC over the ref's name and the rest of the line. Written here, so a ref writer does not load
    the reflog's reader (backend/refdb/reflog) it never uses."""
    body = reflog_body(old, new, time_ms, principal, message)
    return f"{checksum(name, body)} {body}\n"


class NameSet:
    """Ref names, sorted, answering "which name is in the way of this one" in O(depth + log n).

    `refs/heads/a` and `refs/heads/a/b` cannot both exist: on disk one would be a file and a directory.
    """

    def __init__(self, names: Iterable[str] = ()) -> None:
        self._set = set(names)
        self._sorted = sorted(self._set)

    def add(self, name: str) -> None:
        import bisect  # only a writer checks names against each other

        if name not in self._set:
            self._set.add(name)
            bisect.insort(self._sorted, name)

    def conflict(self, name: str) -> str | None:
        """A name that is a directory of `name`, or lives under it; None if there is none."""
        parts = name.split("/")
        for i in range(2, len(parts)):
            ancestor = "/".join(parts[:i])
            if ancestor in self._set:
                return ancestor
        if not self._sorted:  # no other name: nothing to search
            return None
        import bisect

        under = name + "/"
        at = bisect.bisect_left(self._sorted, under)
        if at < len(self._sorted) and self._sorted[at].startswith(under):
            return self._sorted[at]
        return None


def is_listable(name: str) -> bool:
    """A file under refs/ that cannot be a ref (a lock, a temporary or stray file) is not listed."""
    try:
        check_ref_name(name)
    except BadInput:
        return False
    return True


def format_loose(name: str, value: Hash) -> bytes:
    """A loose ref file: `ID CRC` and a newline."""
    return f"{value.hex()} {checksum(name, value.hex())}\n".encode("ascii")


def parse_loose(name: str, data: bytes) -> Hash:
    """The id a loose ref file holds; E007 naming the ref if the file is damaged."""
    if (
        len(data) == _LOOSE_SIZE
        and data[64] == 0x20
        and data[73] == 0x0A
        and _LOWER_HEX.issuperset(data[:64])
        and _LOWER_HEX.issuperset(data[65:73])
    ):
        text = data[:64].decode("ascii")
        if checksum(name, text) != data[65:73].decode("ascii"):
            raise StorageError(f"ref {name} is damaged: its checksum does not match", ref=name)
        return Hash.from_hex(text)
    raise StorageError(f"ref {name} is damaged: {data[:80]!r} is not an object id and checksum", ref=name)
