"""Many reads in a row from one store (`cat-file --batch`), each object hashed once.

The packs are listed once per reader (by the store, or for `of_repo` by the reader itself, which then
opens the store only for what they lack), and each id goes straight to their indexes: one lookup per
pack, one CRC check, one inflation and one BLAKE3 of the canonical bytes, which are then trusted (no
second hash, no re-parsing of the kind tag). Once a reader has looked up more than an eighth of a
pack's ids, or is handed that many names at once, it maps the pack (built once, up to MAP_LIMIT ids):
hex id -> position, with the offsets and CRCs read whole, so a name is one dict probe and is never
parsed. `read_names` reads a stored entry inline and leaves any other to `Pack.read`. Anything the
packs do not hold (a loose object, a pack written since, a segment) goes through the store's own
`get_raw`, which rescans and verifies the same way, so a reader sees what the store sees.

`answer` runs the batch's per-object loop in C (reelstore.backend.packs._stored_batch, an optional extension
built at install when a compiler is there) for the stored entries of the packs: the same checks (its
own CRC-32 and BLAKE3, checked against zlib's and the blake3 package's) and bytes as the inline read,
anything else left to the Python path. REEL_PURE=1 turns it off.
"""

from __future__ import annotations

import os
import zlib
from binascii import hexlify, unhexlify
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

import blake3

from reelstore.backend.packs.pack import KIND_CODES, KIND_TAGS, STORED, Pack
from reelstore.errors import NotFound, StorageError
from reelstore.objects import Hash

try:
    from reelstore.backend.packs import _stored_batch
except ImportError:  # not built (no compiler at install): the pure-Python path does everything
    _stored_batch = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from reelstore.backend.object_store import ObjectStore
    from reelstore.backend.repo import Repo

MAP_LIMIT = 1 << 18
"""Packs with more ids than this are always searched (a map of them costs ~150 bytes an id)."""
COPY_BELOW = 64 << 10
"""Contents shorter than this are handed out as a copy, which costs less than a view when small."""
_BIN_WIDTH = {0xC4: 1, 0xC5: 2, 0xC6: 4}
"""A blob's body is one msgpack bin: its marker byte -> the width of the length that follows."""
_KINDS = {code: kind.encode("ascii") for kind, code in KIND_CODES.items()}
_BLOB = KIND_CODES["blob"]
_LEAF = KIND_TAGS[_BLOB]
"""`blob\0`, the canonical prefix of the one kind without edges."""
_HEX_DIGITS = b"0123456789abcdef"
_TAGS = tuple(KIND_TAGS.get(code) for code in range(max(KIND_TAGS) + 1))
"""Kind code -> `kind\0` (None for a code no kind has), as the accelerator takes them."""


def accelerator_built() -> bool:
    """Whether the optional C extension was built and imports."""
    return _stored_batch is not None


def accelerator_on() -> bool:
    """Whether batch reads use the C extension: built, and not turned off by REEL_PURE (any value but
    empty or 0)."""
    return _stored_batch is not None and os.environ.get("REEL_PURE", "") in ("", "0")


Found = tuple[bytes, "bytes | memoryview"]
"""(kind as ASCII, content): a blob's data, any other kind's body."""


class _Lookup:
    """One pack as a reader sees it: searched until mapped."""

    __slots__ = ("pack", "searches", "positions", "offsets", "crcs")

    def __init__(self, pack: Pack) -> None:
        self.pack = pack
        self.searches = 0
        self.positions: dict[bytes, int] | None = None
        self.offsets: Sequence[int] = ()
        self.crcs: Sequence[int] = ()

    def find(self, h: bytes) -> int:
        """Position of binary id `h`: searched in the index until enough searches make the map worth it."""
        if self.positions is not None:
            return self.positions.get(hexlify(h), -1)
        self.searches += 1
        self.map_for(0)
        return self.pack.index.find(h)

    def map_for(self, more: int) -> None:
        """Map the pack if `more` lookups beside those made so far reach an eighth of its ids."""
        count = self.pack.count
        if self.positions is None and (self.searches + more) * 8 > count and count <= MAP_LIMIT:
            self.positions = self.pack.index.hex_positions()
            self.offsets, self.crcs = self.pack.index.offsets_and_crcs()


def _damaged(h: bytes, pack: Pack, what: str) -> StorageError:
    return StorageError(f"object {h.hex()} in {pack.name} is damaged: {what}", id=Hash(h))


def _content(raw: bytes, start: int, blob: bool, h: bytes, pack: Pack | None) -> bytes | memoryview:
    """The content of verified canonical bytes whose body starts at `start`: a blob's data (its one
    msgpack bin checked: bytes enter a store only decoded, so a right hash over a bad body is damage),
    any other kind's body."""
    if blob:
        width = _BIN_WIDTH.get(raw[start] if start < len(raw) else -1)
        if width is None or int.from_bytes(raw[start + 1 : start + 1 + width], "big") != len(raw) - start - 1 - width:
            what = "blob body is not a single msgpack bin"
            raise _damaged(h, pack, what) if pack else StorageError(f"object {h.hex()} is damaged: {what}", id=Hash(h))
        start += 1 + width
    return raw[start:] if len(raw) - start < COPY_BELOW else memoryview(raw)[start:]


class _Mapped:
    """One pack, mapped for a level that reads many of its ids."""

    __slots__ = ("pack", "positions", "offsets", "map", "start", "end")

    def __init__(self, pack: Pack) -> None:
        self.pack = pack
        ids, self.offsets, _, _ = pack.index.columns()
        self.positions = dict(zip(ids, range(len(ids))))
        self.map, self.start, self.end = pack.map, pack.data_start, pack.data_end


Take = Callable[[bytes, bytes, bool], None]
"""Hears of each object `read_many` reads: (id, canonical bytes, held stored by the store)."""


class BulkReader:
    """Verified (kind, content) of object after object from `store`."""

    def __init__(self, store: ObjectStore | Callable[[], ObjectStore], packs: list[Pack] | None = None) -> None:
        """`store`, or the function that opens it, with `packs` the packs to read first (by default the
        store's own, unless this thread has an open write batch, whose objects only `get_raw` reads)."""
        self._store = None if callable(store) else store
        self._open_store = store if callable(store) else None
        if packs is None:
            from reelstore.backend.disk_store import DiskObjectStore

            disk = isinstance(self.store, DiskObjectStore) and not self.store.batch_open
            packs = self.store.packs() if isinstance(self.store, DiskObjectStore) and disk else []
        self._packs = [_Lookup(p) for p in packs]
        self.accelerated = accelerator_on()
        """Whether `answer` runs the C loop (else it answers nothing and the caller reads each name)."""
        self._spans: tuple[tuple[object, object, int, int], ...] | None = None
        self._mapped: dict[int, _Mapped] = {}
        """The packs `read_many` has mapped, by position in `packs`: kept from one call to the next."""

    @classmethod
    def of_repo(cls, repo: Repo) -> BulkReader:
        """A reader of `repo` that opens the packs itself and its object store only for what they do not
        hold: a batch of packed objects then never loads the store's writing machinery (loose objects,
        write batches, segments, the pack writer). A pack it cannot open is left to the store, which
        reports or repairs it."""
        if repo.path is None:
            return cls(repo.objects)
        pack_dir = repo.path / "objects" / "pack"  # DiskObjectStore's layout (docs/format.md)
        try:
            names = sorted(os.listdir(pack_dir))
        except FileNotFoundError:
            names = []
        packs = []
        for name in names:
            if name.startswith("pack-") and name.endswith(".pack") and f"{name[:-5]}.idx" in names:
                try:
                    packs.append(Pack(pack_dir / name))
                except (StorageError, OSError):
                    continue
        return cls(lambda: repo.objects, packs)

    @property
    def store(self) -> ObjectStore:
        if self._store is None:
            assert self._open_store is not None
            self._store = self._open_store()
        return self._store

    @property
    def packs(self) -> list[Pack]:
        """The packs this reader reads first, in order: a caller with a whole pack's worth of ids may
        read them in its own loop, and the rest through `read_raw`."""
        return [lookup.pack for lookup in self._packs]

    def answer(self, records: bytes, start: int, sep: bytes, out: bytearray, with_content: bool, direct: int) -> int:
        """Append to `out` the batch answers (`<name> <kind> <size>\n`, and `<content>\n` with content) of
        the names in `records` (each ending with `sep`) from offset `start`, in order, up to the first one
        the C loop leaves to the caller: a name that is not a full lowercase hex id of a stored entry in
        these packs, an entry failing a check (the caller's read then names the damage), a content of
        `direct` bytes or more. Returns the offset where that name starts (len(records) once all are
        answered); `start` itself when not accelerated."""
        if not self.accelerated:
            return start
        if self._spans is None:
            self._spans = tuple(
                (lk.pack.index.map, lk.pack.map, lk.pack.data_start, lk.pack.data_end) for lk in self._packs
            )
        assert _stored_batch is not None
        return _stored_batch.answer(records, start, sep[0], self._spans, _TAGS, out, with_content, direct)

    def read_raw(self, h: bytes) -> tuple[bytes, bool] | None:
        """The verified canonical bytes of `h` (kind tag and body, as `get_raw` gives them), and whether a
        pack holds its body stored (its writer found it incompressible); None if the store has none;
        E007 if its copy is damaged."""
        for lookup in self._packs:
            i = lookup.find(h)
            if i >= 0:
                pack = lookup.pack
                raw = pack.read(h, i)[1]
                return raw, pack.map[pack.index.entry(i)[0] + 1] == STORED
        try:
            return self.store.get_raw(Hash(h)), False
        except NotFound:
            return None

    def read(self, h: bytes) -> tuple[str, memoryview] | None:
        """(kind, content) of the object `h` (a blob's data, any other kind's body), or None if the store
        has none; E007 if its copy is damaged."""
        for lookup in self._packs:
            i = lookup.find(h)
            if i >= 0:
                pack = lookup.pack
                raw = pack.read(h, i)[1]
                break
        else:
            try:
                raw = self.store.get_raw(Hash(h))
            except NotFound:
                return None
            pack = None
        nul = raw.index(b"\0")
        content = _content(raw, nul + 1, raw[:nul] == b"blob", h, pack)
        return raw[:nul].decode("ascii"), content if isinstance(content, memoryview) else memoryview(content)

    def read_names(self, names: list[bytes]) -> Iterator[Found | None]:
        """For each name in turn, (kind, content) if it is a full lowercase hex id that one of the reader's
        packs holds, else None: the caller resolves that name its own way (a revision, or `read` for an
        id kept elsewhere or nowhere). In a mapped pack a name is one dict probe, never parsed; the other
        packs are searched with the name parsed once. Each object is checked and hashed once, as `read`
        does (E007 on damage)."""
        for lookup in self._packs:
            lookup.map_for(len(names))
        mapped = [(lk.positions, lk.offsets, lk.crcs, lk.pack) for lk in self._packs if lk.positions is not None]
        searched = [lk for lk in self._packs if lk.positions is None]
        crc32, stored_method, blob, tags, kinds, widths = zlib.crc32, STORED, _BLOB, KIND_TAGS, _KINDS, _BIN_WIDTH
        hasher = blake3.blake3()  # one, reset for each object: cheaper than a new one each time
        reset, update, digest = hasher.reset, hasher.update, hasher.digest
        for name in names:
            for probe in mapped:
                i = probe[0].get(name, -1)
                if i >= 0:
                    _, offsets, crcs, pack = probe
                    off, crc = offsets[i], crcs[i]
                    break
            else:
                if not searched or len(name) != 64 or name.translate(None, _HEX_DIGITS):
                    yield None
                    continue
                h = unhexlify(name)
                for lookup in searched:
                    i = lookup.find(h)
                    if i >= 0:
                        break
                else:
                    yield None
                    continue
                pack = lookup.pack
                off, crc = pack.index.entry(i)
            m, hi = pack.map, pack.data_end
            # A stored entry (its size and payload length are one varint, written twice) is read here when
            # that varint is one or two bytes; any other entry, and any that fails a check here, is read
            # by the pack itself, which names the damage.
            stored = False
            if pack.data_start <= off <= hi - 6:
                code, method, a, b, c, d = m[off : off + 6]
                if method == stored_method:
                    if a < 0x80:
                        size, pos, stored = a, off + 4, b == a
                    elif b < 0x80:
                        size, pos, stored = (a & 0x7F) | b << 7, off + 6, c == a and d == b
            if stored and (tag := tags.get(code)) is not None and pos + size <= hi:
                entry = m[off : pos + size]
                if crc32(entry) == crc:
                    raw = tag + entry[pos - off :]
                    reset()
                    update(raw)
                    if digest() != unhexlify(name):
                        raise _damaged(unhexlify(name), pack, "content does not hash to its id")
                    if code != blob:
                        yield kinds[code], raw[len(tag) :]
                        continue
                    width = widths.get(raw[5] if size else -1)
                    if width is not None and int.from_bytes(raw[6 : 6 + width], "big") == size - 1 - width:
                        yield b"blob", raw[6 + width :]
                        continue
            h = unhexlify(name)
            code, raw = pack.read(h, i)
            yield kinds[code], _content(raw, len(tags[code]), code == _BLOB, h, pack)

    def read_many(self, ids: Sequence[bytes], take: Take, inner: Callable[[bytes], None], what: str = "read") -> None:
        """Hand `take` each of `ids`, in order, with its canonical bytes and whether it is held stored,
        and `inner` the bytes of each that is not a blob; E007 on damage, and a StorageError naming the
        first id the store does not hold. An id a mapped pack holds is read from that pack, any other
        through `read_raw`.

        A stored entry in a mapped pack is read here: its canonical bytes are BLAKE3-hashed against the
        id, which covers everything the entry's CRC would (the kind code makes the tag, the size the
        extent, the method byte only says how to read it), so the CRC is not computed as well."""
        for k, pack in enumerate(self.packs):
            if k not in self._mapped and len(ids) * 8 > pack.count and pack.count <= MAP_LIMIT:
                self._mapped[k] = _Mapped(pack)
        maps = list(self._mapped.values())
        tags, stored_method, blob = KIND_TAGS, STORED, KIND_CODES["blob"]
        hasher = blake3.blake3()  # one, reset for each object: cheaper than a new one each time
        reset, update, digest = hasher.reset, hasher.update, hasher.digest
        for h in ids:
            raw, stored = None, True
            for mp in maps:
                i = mp.positions.get(h, -1)
                if i < 0:
                    continue
                off, m, end = mp.offsets[i], mp.map, mp.end
                # A stored entry's size and payload length are one varint written twice; when it is one
                # or two bytes the entry is read here, else by the pack (CRC, inflation, one hash).
                size = pos = -1
                if mp.start <= off <= end - 6:
                    code, method, a, b, c, d = m[off : off + 6]
                    if method == stored_method:
                        if a < 0x80 and b == a:
                            size, pos = a, off + 4
                        elif a >= 0x80 and b < 0x80 and c == a and d == b:
                            size, pos = (a & 0x7F) | b << 7, off + 6
                if size >= 0 and (tag := tags.get(code)) is not None and pos + size <= end:
                    raw = tag + m[pos : pos + size]
                    reset()
                    update(raw)
                    if digest() != h:
                        raise StorageError(
                            f"object {h.hex()} in {mp.pack.name} is damaged: content does not hash to its id",
                            id=Hash(h),
                        )
                else:
                    code, raw = mp.pack.read(h, i)
                    stored = m[off + 1] == stored_method  # the entry parsed: its method byte is there
                break
            if raw is not None:
                take(h, raw, stored)
                if code != blob:
                    inner(raw)
                continue
            found = self.read_raw(h)
            if found is None:
                raise StorageError(f"cannot {what}: object {h.hex()} is missing from this store", id=Hash(h))
            take(h, found[0], found[1])
            if not found[0].startswith(_LEAF):
                inner(found[0])
