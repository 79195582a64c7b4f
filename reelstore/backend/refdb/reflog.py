"""Reflog lines: `CRC OLD NEW TIME WHO<tab>MESSAGE`, each checksummed with its ref's name."""

from __future__ import annotations

import re
from typing import NamedTuple

from reelstore.backend.refdb.ref_format import checksum, reflog_body, reflog_line
from reelstore.errors import BadInput, StorageError
from reelstore.objects import ZERO_HEX, Hash
from reelstore.objects.hash import is_full_hex

_CRC = r"[0-9a-f]{8}"
"""A line's checksum; compiled by `re` when a reflog is first read (writing a line never needs it)."""


class ReflogEntry(NamedTuple):
    old: Hash | None
    new: Hash | None
    time_ms: int
    principal: str
    message: str

    def body(self) -> str:
        return reflog_body(self.old, self.new, self.time_ms, self.principal, self.message)

    def line(self, name: str) -> str:
        """`CRC OLD NEW TIME WHO<tab>MESSAGE`, the CRC over the ref's name and the rest of the line."""
        return reflog_line(name, self.old, self.new, self.time_ms, self.principal, self.message)

    @classmethod
    def parse(cls, line: str, name: str) -> ReflogEntry:
        """One line of `name`'s reflog (without its newline). E014 if malformed or its checksum fails."""
        crc = line[:8]
        if not (len(line) > 9 and line[8] == " " and re.fullmatch(_CRC, crc)):
            raise BadInput(f"malformed reflog line {line[:100]!r}")
        body = line[9:]
        if checksum(name, body) != crc:
            raise BadInput(f"reflog line fails its checksum: {line[:100]!r}")
        head, _, message = body.partition("\t")
        parts = head.split(" ", 3)
        if (
            len(parts) < 3
            or not is_full_hex(parts[0])
            or not is_full_hex(parts[1])
            or not parts[2].isdigit()
            or (not parts[2].isascii())
        ):
            raise BadInput(f"malformed reflog line {line[:100]!r}")
        old = None if parts[0] == ZERO_HEX else Hash.from_hex(parts[0])
        new = None if parts[1] == ZERO_HEX else Hash.from_hex(parts[1])
        return cls(old, new, int(parts[2]), parts[3] if len(parts) > 3 else "", message)


def parse_reflog(name: str, data: bytes) -> list[ReflogEntry]:
    """Every line of `name`'s reflog; E007 naming the ref and line on the first damaged one."""
    if data and not data.endswith(b"\n"):
        raise StorageError(f"reflog of {name} is damaged: its last line is torn", ref=name)
    out = []
    for no, raw in enumerate(data.split(b"\n")[:-1], start=1):
        try:
            out.append(ReflogEntry.parse(raw.decode("utf-8"), name))
        except UnicodeDecodeError:
            raise StorageError(f"reflog of {name} is damaged at line {no}: not UTF-8", ref=name) from None
        except BadInput as exc:
            raise StorageError(f"reflog of {name} is damaged at line {no}: {exc.message}", ref=name) from None
    return out
