"""A whole pack checked entry by entry, as `verify-pack` and fsck read it: both trailers, every entry's
CRC, inflation, hash and decoding by its kind, and that the entries tile the pack exactly.

Apart from `backend.packs.pack` so a verb that reads a few objects from a pack does not define what only a
verification returns."""

from __future__ import annotations

import zlib
from dataclasses import dataclass

from reelstore.backend.packs.pack import KIND_NAMES, METHOD_NAMES, Pack, hash_mapped
from reelstore.errors import BadInput, StorageError
from reelstore.objects import Hash


@dataclass(frozen=True, slots=True)
class EntryInfo:
    """What verify-pack -v shows for one entry."""

    id: Hash
    kind: str
    size: int
    packed: int
    offset: int
    method: str
    depth: int
    base: int | None
    mtime: int


def verify_pack(pack: Pack) -> tuple[list[EntryInfo], list[str]]:
    """Check everything: both trailers, every entry's CRC, inflation, hash and decoding by its kind, and
    that the entries tile the pack exactly. Returns the entries (in pack order) and the damage found, named."""
    from reelstore.objects import decode  # the kinds' codec: only verifying a pack decodes its objects

    name = pack.path.name
    problems: list[str] = []
    if hash_mapped(pack.map, pack.data_end) != pack.map[pack.data_end :]:
        problems.append(f"{name}: pack checksum mismatch")
    if not pack.index.checksum_ok():
        problems.append(f"{pack.index.path.name}: index checksum mismatch")
    rows = sorted((off, i) for i, (_, off, _) in enumerate(pack.entries()))
    depth: dict[int, int] = {}
    infos: list[EntryInfo] = []
    expect = pack.data_start
    for off, i in rows:
        h = pack.index.id(i)
        if off != expect:
            problems.append(f"{name}: entry {h.hex()} at offset {off}, expected {expect}")
        try:
            p = pack.parse_entry(off)
            expect = p.end
            if zlib.crc32(pack.map[off : p.end]) != pack.index.crc(i):
                raise ValueError("entry checksum mismatch")
            decode(pack.get_raw(h, i))
        except (ValueError, StorageError, BadInput) as exc:
            msg = exc.message if isinstance(exc, (StorageError, BadInput)) else str(exc)
            problems.append(f"{name}: object {h.hex()} at offset {off}: {msg}")
            continue
        depth[off] = depth.get(p.base, 0) + 1 if p.base is not None else 0
        infos.append(
            EntryInfo(
                h,
                KIND_NAMES[p.code],
                p.size,
                p.end - off,
                off,
                METHOD_NAMES[p.method],
                depth[off],
                p.base,
                pack.index.mtime(i),
            )
        )
    if expect != pack.data_end and rows:
        problems.append(f"{name}: entries end at {expect}, the trailer starts at {pack.data_end}")
    return infos, problems
