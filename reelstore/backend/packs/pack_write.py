"""Writing packs: order the objects so that versions sit together, train a dictionary for the small
ones, compress each alone, with the dictionary or against an earlier entry, and write the pack and
then its index, atomically. The format is read by `pack.py` and documented in docs/format.md."""

from __future__ import annotations

import array
import operator
import os
import time
import zlib
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import blake3
import zstandard

from reelstore.backend.fileio import fsync_dir, temp_name
from reelstore.backend.packs.pack import (
    _FLAGS,
    BASE,
    DICT,
    KIND_CODES,
    METHOD_NAMES,
    PACK_HEADER,
    PACK_MAGIC,
    STORED,
    ZSTD,
    Pack,
    _varint,
    split_raw,
)
from reelstore.backend.packs.pack_copy import COPY_PIECE, Copies, IndexColumns, Reuse, new_columns
from reelstore.backend.packs.pack_index import TRAILER, VERSION, index_parts
from reelstore.backend.packs.pack_item import DICT_MAX, PackItem, PackOptions, PackResult
from reelstore.errors import StorageError
from reelstore.objects import Hash


class _Entry:
    __slots__ = ("id", "code", "body", "mtime", "offset", "crc", "depth", "zc", "load")

    def __init__(self, item: PackItem) -> None:
        self.id = item.id
        self.load = item.load
        if item.load is not None:
            self.code, self.body = KIND_CODES[item.kind], b""
        else:
            self.code, self.body = split_raw(item.raw)
        self.mtime = int(item.mtime)
        self.offset = 0
        self.crc = 0
        self.depth = 0
        self.zc: zstandard.ZstdCompressor | None = None

    def loaded(self) -> None:
        """Read a lazy entry's body now (its kind must be the one it was listed with)."""
        if self.load is not None and not self.body:
            code, self.body = split_raw(self.load())
            if code != self.code:
                raise StorageError(f"object {self.id.hex()} changed kind while it was packed")

    def drop(self) -> None:
        """Forget the body and compressor once no later entry can use this one as a base."""
        self.zc = None
        if self.load is not None:
            self.body = b""


TRAIN_SAMPLES = 2000
"""Most bodies a dictionary is trained on (spread over the pack)."""


def _train(entries: list[_Entry], level: int) -> bytes:
    """A zstd dictionary for this pack's small bodies, or b"" when it would not pay for itself.

    Bodies held in memory are all candidates; of the lazy ones (read only when written), an even spread
    of at most TRAIN_SAMPLES is read now and forgotten again, so training stays in bounded memory."""
    lazy = [e for e in entries if e.load is not None]
    step = max(1, len(lazy) // TRAIN_SAMPLES)
    for e in lazy[::step]:
        e.loaded()
    samples: list[bytes | bytearray | memoryview] = [e.body for e in entries if 16 <= len(e.body) <= 4096]
    for e in lazy[::step]:
        e.drop()
    small = len(samples) * (step if lazy else 1)
    if len(samples) < 256 and small < 256:
        return b""
    samples = samples[:: max(1, len(samples) // TRAIN_SAMPLES)]
    if len(samples) < 16:
        return b""
    # A dictionary holds what the bodies share: if a spread of them side by side does not compress,
    # there is nothing to learn, and training (and compressing every small body with it) is wasted.
    spread = samples[:: max(1, len(samples) // 256)]
    quick = zstandard.ZstdCompressor(compression_params=zstandard.ZstdCompressionParameters.from_level(1, **_FLAGS))
    joined = b"".join(spread)
    together = len(quick.compress(joined))
    if together * 10 > len(joined) * 9:
        return b""
    total = sum(len(s) for s in samples)
    size = min(64 * 1024, max(4096, total // 20))
    # Nor when what they share would not pay for the dictionary: compressed side by side rather than
    # each alone, the spread saves about as much as a dictionary could (a dictionary holds less than the
    # bodies beside each one), so if that saving would not cover the dictionary, neither would training.
    # (A quarter of the spread, each alone, estimates the whole spread's cost apart.)
    few = spread[::4]
    apart = sum(min(len(s), len(quick.compress(s))) for s in few) * len(spread) / len(few)
    if (apart - together) * small <= 2 * size * len(spread):
        return b""
    try:
        trained = zstandard.train_dictionary(size, samples, k=200, d=8, steps=1, level=level)
    except zstandard.ZstdError:
        return b""
    # Keep it only if it saves more on this pack's small bodies than it costs to store.
    probe = samples[:: max(1, len(samples) // 200)]
    params = zstandard.ZstdCompressionParameters.from_level(level, **_FLAGS)
    plain = zstandard.ZstdCompressor(compression_params=params)
    with_dict = zstandard.ZstdCompressor(dict_data=trained, compression_params=params)
    # Against what each body would cost anyway: one that neither shrinks is stored, whichever is tried.
    saved = sum(min(len(b), len(plain.compress(b))) - min(len(b), len(with_dict.compress(b))) for b in probe)
    return trained.as_bytes() if saved * small / len(probe) > 2 * len(trained.as_bytes()) else b""


class _Compressor:
    def __init__(self, dict_bytes: bytes, opts: PackOptions) -> None:
        self.opts = opts
        params = zstandard.ZstdCompressionParameters.from_level(opts.level, **_FLAGS)
        self.plain = zstandard.ZstdCompressor(compression_params=params)
        self.dict = None
        if dict_bytes:
            zdict = zstandard.ZstdCompressionDict(dict_bytes, dict_type=zstandard.DICT_TYPE_FULLDICT)
            self.dict = zstandard.ZstdCompressor(dict_data=zdict, compression_params=params)

    def alone(self, body: bytes) -> tuple[int, bytes]:
        """One compression: with the dictionary for a small body (a dictionary trained on this pack's
        small bodies does at least as well as none), else plain; stored when that does not shrink it,
        so incompressible data costs one attempt."""
        method, comp = (DICT, self.dict) if self.dict is not None and len(body) <= DICT_MAX else (ZSTD, self.plain)
        data = comp.compress(body)
        return (method, data) if len(data) < len(body) else (STORED, body)

    def against(self, base: _Entry, body: bytes) -> bytes:
        """`body` compressed with `base`'s body as prefix; the compressor is kept on the base entry, which
        serves as a candidate for up to `window` later entries."""
        if base.zc is None:
            # Tables sized for the prefix keep it cheap to load; the match, not the level, does the work.
            size = 2 * len(base.body)
            params = zstandard.ZstdCompressionParameters.from_level(1, source_size=size, **_FLAGS)
            zdict = zstandard.ZstdCompressionDict(base.body, dict_type=zstandard.DICT_TYPE_RAWCONTENT)
            base.zc = zstandard.ZstdCompressor(dict_data=zdict, compression_params=params)
        return base.zc.compress(body)


def _order(items: list[_Entry], hints: dict[Hash, str]) -> list[_Entry]:
    """Group likely-similar objects together: same kind and name, then in the order given. Callers
    pass objects in walk order (newest history first), so each version sits beside its neighbours."""
    if not hints:  # the same order: sorting is stable
        return sorted(items, key=operator.attrgetter("code"))
    return [e for _, e in sorted(enumerate(items), key=lambda p: (p[1].code, hints.get(p[1].id, ""), p[0]))]


def _seed(tail: tuple[int, int, Hash, Pack, int], first: int) -> _Entry:
    """The last copied entry of a name as a delta base for the fresh objects of that name (read and
    re-hashed from its old pack; it sits `first` + its offset into the new one)."""
    at, depth, h, pack, i = tail
    raw = pack.get_raw(h, i)
    entry = _Entry(PackItem(h, raw, 0))
    entry.offset, entry.depth = first + at, depth
    return entry


def _uvarint(n: int) -> bytes:
    """`_varint`, with the one- and two-byte cases (nearly every size in a pack) built directly."""
    if n < 0x80:
        return bytes((n,))
    if n < 0x4000:
        return bytes(((n & 0x7F) | 0x80, n >> 7))
    return _varint(n)


PROGRESS_EVERY_S = 0.5
"""Besides every 1000 objects, progress is reported at least this often: large objects pack slowly."""


def write_pack_stream(
    write: Callable[[bytes | memoryview], object],
    items: Iterable[PackItem],
    opts: PackOptions | None = None,
    progress: Callable[[int, int], None] | None = None,
    reuse: Sequence[Reuse] = (),
    damaged: Callable[[Hash], None] | None = None,
) -> tuple[IndexColumns, bytes, dict[str, int]]:
    """Write a whole pack through `write`: the `reuse` entries copied first, then `items` packed; returns
    the index rows (as columns, in no particular order) and the trailer (and how many entries each
    method stores).

    An entry of `reuse` whose CRC fails is reported to `damaged` (which may raise) and left out; with
    no `damaged`, StorageError. An id both copied and among `items` is copied."""
    opts = opts or PackOptions()
    copies = Copies(reuse, damaged) if reuse else None
    hints: dict[Hash, str] = {}
    entries: list[_Entry] = []
    # Entries not copied come newest first, like a walk's order, so versions of a file sit together.
    fallback = sorted(copies.fallback, key=lambda item: -item.mtime) if copies else []
    pending = [*items, *fallback]
    # The few ids to pack are looked for among the many copied, not the other way round.
    to_pack: set[bytes] = {item.id for item in pending}
    seen = to_pack.intersection(copies.columns[0]) if copies else set()
    for item in pending:
        if item.id not in seen:
            seen.add(item.id)
            entries.append(_Entry(item))
            if item.hint:
                hints[item.id] = item.hint
    entries = _order(entries, hints)
    dict_bytes = copies.dict_bytes if copies and copies.dict_bytes is not None else _train(entries, opts.level)
    comp = _Compressor(dict_bytes, opts)
    hasher = blake3.blake3()
    buffer = bytearray()

    def out(data: bytes | memoryview) -> None:
        # Small writes gather in one buffer: a write and a hash update per entry cost more than the entry.
        if len(data) >= COPY_PIECE:
            flush()
            hasher.update(data)
            write(data)
            return
        buffer.extend(data)
        if len(buffer) >= COPY_PIECE:
            flush()

    def flush() -> None:
        if buffer:
            hasher.update(buffer)
            write(bytes(buffer))
            buffer.clear()

    copied = len(copies.columns[0]) if copies else 0
    total = copied + len(entries)
    out(PACK_HEADER.pack(PACK_MAGIC, VERSION, total, len(dict_bytes)) + dict_bytes)
    first = PACK_HEADER.size + len(dict_bytes)
    counts = dict.fromkeys(METHOD_NAMES.values(), 0)
    columns = new_columns()
    if copies:
        copies.write(out, (lambda n: progress(n, total)) if progress else None)
        if progress is not None and not entries and copied % 1000:
            progress(copied, total)  # the final count, so a "done." line states the whole
        ids, at, crcs, mtimes = copies.columns
        columns = (ids, array.array("q", map(first.__add__, at)), crcs, mtimes)
        counts = dict(copies.counts)
    offset = first + (copies.size if copies else 0)
    ticked = time.monotonic()
    window: list[_Entry] = []
    group: tuple[int, str] | None = None
    # The loop runs once per object: what it calls is bound here, and headers and small writes are
    # built in place (a Python call per step costs more than the step for a small object).
    ids_add, offsets_add = columns[0].append, columns[1].append
    crcs_add, mtimes_add = columns[2].append, columns[3].append
    alone, against, crc32 = comp.alone, comp.against, zlib.crc32
    min_delta, max_depth, width = opts.min_delta, opts.depth, opts.window
    tally = dict.fromkeys(METHOD_NAMES, 0)
    for n, entry in enumerate(entries, copied):
        key = (entry.code, hints.get(entry.id, "") if hints else "")
        if key != group:
            for old in window:
                old.drop()
            group, window = key, []
            tail = copies.tails.get(key) if copies and key[1] else None
            if tail is not None:
                window = [_seed(tail, first)]
        if entry.load is not None:
            entry.loaded()
        body = entry.body
        size = len(body)
        named = bool(key[1])
        # Named objects (versions of one file) try their neighbours first and skip compressing alone
        # when a delta is already small; unnamed ones compress alone first and try one neighbour.
        method, data, base = STORED, body, None
        if not named:
            method, data = alone(body)
        if size >= min_delta and (named or method != STORED):
            for cand in reversed(window) if named else window[-1:]:
                if cand.depth >= max_depth or len(cand.body) > 4 * size + 1024:
                    continue
                delta = against(cand, body)
                if len(delta) + 4 < len(data):
                    method, data, base = BASE, delta, cand
                    if len(delta) * 32 < size:
                        break
                elif len(delta) >= size:
                    break  # nothing shared with a neighbour and nothing to squeeze: incompressible
        if named and (base is None or len(data) * 8 > size):
            alone_method, alone_data = alone(body)
            if base is None or len(alone_data) <= len(data) + 4:
                method, data, base = alone_method, alone_data, None
        if base is None:
            head = bytes((entry.code, method)) + _uvarint(size) + _uvarint(len(data))
        else:
            head = bytes((entry.code, method)) + _uvarint(size) + _uvarint(offset - base.offset) + _uvarint(len(data))
            entry.depth = base.depth + 1
        entry.offset = offset
        ids_add(entry.id)
        offsets_add(offset)
        crcs_add(crc32(data, crc32(head)))
        mtimes_add(entry.mtime)
        if len(data) < COPY_PIECE:
            buffer += head
            buffer += data
            if len(buffer) >= COPY_PIECE:
                flush()
        else:
            out(head)
            out(data)
        offset += len(head) + len(data)
        tally[method] += 1
        if size >= min_delta:
            window.append(entry)
            if len(window) > width:
                window.pop(0).drop()
        else:
            entry.zc = None
            if entry.load is not None:
                entry.body = b""
        if progress is not None and (
            (n + 1) % 1000 == 0 or n + 1 == total or time.monotonic() - ticked >= PROGRESS_EVERY_S
        ):
            ticked = time.monotonic()
            progress(n + 1, total)
    for code, count in tally.items():
        counts[METHOD_NAMES[code]] += count
    flush()
    trailer = hasher.digest()
    write(trailer)
    for entry in entries:
        entry.body, entry.zc = b"", None
    return columns, trailer, counts


def write_pack(
    directory: Path,
    items: Iterable[PackItem],
    opts: PackOptions | None = None,
    *,
    fsync: bool = True,
    progress: Callable[[int, int], None] | None = None,
    reuse: Sequence[Reuse] = (),
    damaged: Callable[[Hash], None] | None = None,
) -> PackResult:
    """Write `pack-<trailer>.pack` and its `.idx` into `directory`, atomically: the index comes last,
    so a reader never sees an index whose pack is incomplete. Before either is named, the pack is read
    back from the file and checked against its trailer, and a spread of its entries is read through the
    new index (see `write_pack_stream` for `reuse`)."""
    directory.mkdir(parents=True, exist_ok=True)
    tmp_pack = temp_name(directory / "pack.pack")
    tmp_idx: Path | None = None
    try:
        with open(tmp_pack, "xb") as f:
            columns, trailer, counts = write_pack_stream(f.write, items, opts, progress, reuse, damaged)
            f.flush()
            if fsync:
                os.fsync(f.fileno())
        _check_written(tmp_pack, trailer)
        name = f"pack-{trailer.hex()}"
        pack_path, idx_path = directory / f"{name}.pack", directory / f"{name}.idx"
        count = len(columns[0])
        idx = index_parts(*columns, trailer)
        del columns  # the index's pieces replace its columns: neither is held twice
        tmp_idx = temp_name(idx_path)
        with open(tmp_idx, "xb") as f:
            f.writelines(idx)
            del idx
            if fsync:
                f.flush()
                os.fsync(f.fileno())
        _check_entries(tmp_pack, tmp_idx)
        size = tmp_pack.stat().st_size
        os.replace(tmp_pack, pack_path)
        os.replace(tmp_idx, idx_path)
    finally:
        tmp_pack.unlink(missing_ok=True)
        if tmp_idx is not None:
            tmp_idx.unlink(missing_ok=True)
    if fsync:
        fsync_dir(directory)
    return PackResult(name, pack_path, idx_path, count, trailer, size, counts)


CHECK_SAMPLE = 256
"""How many entries of a new pack are read back through its index before it is named."""


def _check_entries(pack_path: Path, idx_path: Path) -> None:
    """Read a spread of the new pack's entries through its new index (CRC, inflation, re-hash): an index
    that does not match its pack (a wrong offset while copying) is caught before the pack replaces
    anything. E007 if one fails."""
    pack = Pack(pack_path, idx_path)
    try:
        n = pack.count
        for i in sorted({*range(0, n, max(1, n // CHECK_SAMPLE)), n - 1}) if n else ():
            pack.get_raw(pack.index.id(i), i)
            pack.release_pages()  # a page fault maps its neighbours too: let go as we go
    finally:
        pack.close()


def _check_written(path: Path, trailer: bytes) -> None:
    """The file as it is on disk hashes to the trailer computed while writing it (E007 if not); read
    a piece at a time, so checking a large pack holds little of it."""
    hasher = blake3.blake3()
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        left = size - TRAILER
        while left > 0:
            piece = f.read(min(left, COPY_PIECE))
            if not piece:
                break
            hasher.update(piece)
            left -= len(piece)
        tail = f.read()
    if size < TRAILER or left or tail != trailer or hasher.digest() != trailer:
        raise StorageError(f"{path.name}: the pack read back does not match what was written")
