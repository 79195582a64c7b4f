"""Group commit of objects: every object one operation writes goes into one new pack, made durable by
one fsync (git's `core.fsyncMethod=batch`, done with a pack instead of a dummy file). An operation that
writes a single object writes it loose instead (backend/write_batch.py).

While a batch is open, objects stream into a temporary pack in arrival order (each entry compressed
alone, so memory stays bounded however many blobs arrive); nothing is visible to other processes.
`finish` writes the count into the header, the trailer, fsyncs the pack once, writes its index,
renames the pack and then the index into place and fsyncs the directory once. The index is not
fsynced: it is derived from the pack, and a store that finds a pack whose index is torn, or missing
because its writer died between the two renames, rebuilds it from the pack (`rebuild_index`). A batch
that is discarded (the operation failed before its commit point) leaves nothing: its temporary file
is deleted at once.
"""

from __future__ import annotations

import mmap
import os
import zlib
from pathlib import Path

import blake3
import zstandard

from reelstore.backend.fileio import fsync_dir, pid_alive, temp_name
from reelstore.backend.packs.pack import (
    _FLAGS,
    _FORMAT,
    PACK_HEADER,
    PACK_MAGIC,
    STORED,
    ZSTD,
    _varint,
    join_raw,
    scan_pack,
    split_raw,
)
from reelstore.backend.packs.pack_index import FANOUT, IDX_HEADER, ROW, TRAILER, VERSION, index_bytes
from reelstore.crashpoints import crash_point
from reelstore.errors import StorageError
from reelstore.objects import Hash

KEEP_RAW = 64 * 1024
"""Objects other than blobs up to this size are also kept in memory, so the kernel reading back the
trees and views it has just written costs nothing; blobs are read back from the file (bounded memory)."""
_BLOB = 1
_CHUNK = 1 << 20


class PackBatch:
    """One operation's new objects, on their way into one pack."""

    def __init__(self, directory: Path, *, fsync: bool = True, level: int = 3) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self.fsync = fsync
        self.tmp = temp_name(directory / "pack.pack")
        self._file = open(self.tmp, "xb+")  # noqa: SIM115 (closed by finish or discard)
        self._file.write(PACK_HEADER.pack(PACK_MAGIC, VERSION, 0, 0))
        self._offset = PACK_HEADER.size
        params = zstandard.ZstdCompressionParameters.from_level(level, **_FLAGS)
        self._zc = zstandard.ZstdCompressor(compression_params=params)
        self._rows: list[tuple[Hash, int, int, int]] = []
        self._where: dict[Hash, tuple[int, int, int, int, int]] = {}
        """id -> (offset of the data, its length, method, body size, kind code)."""
        self._raw: dict[Hash, bytes] = {}
        self._mtime = 0

    def __contains__(self, h: object) -> bool:
        return h in self._where

    def add(self, h: Hash, raw: bytes, mtime: int) -> None:
        """Append one verified object (a second copy of the same id is ignored)."""
        if h in self._where:
            return
        code, body = split_raw(raw)
        method, data = STORED, body
        if len(body) >= 32:
            packed = self._zc.compress(body)
            if len(packed) < len(body):
                method, data = ZSTD, packed
        head = bytes((code, method)) + _varint(len(body)) + _varint(len(data))
        self._file.write(head)
        self._file.write(data)
        crc = zlib.crc32(data, zlib.crc32(head))
        self._rows.append((h, self._offset, crc, mtime))
        self._where[h] = (self._offset + len(head), len(data), method, len(body), code)
        self._offset += len(head) + len(data)
        self._mtime = max(self._mtime, mtime)
        if code != _BLOB and len(raw) <= KEEP_RAW:
            self._raw[h] = raw

    def get_raw(self, h: Hash) -> bytes | None:
        """Canonical bytes of an object added to this batch, or None."""
        raw = self._raw.get(h)
        if raw is not None or h not in self._where:
            return raw
        start, length, method, size, code = self._where[h]
        self._file.flush()
        data = os.pread(self._file.fileno(), length, start)
        if method == ZSTD:
            dec = zstandard.ZstdDecompressor(format=_FORMAT)
            data = dec.decompress(data, max_output_size=size, allow_extra_data=False)
        return join_raw(code, data)

    def discard(self) -> None:
        """Drop everything: the operation never reached its commit point."""
        self._file.close()
        self.tmp.unlink(missing_ok=True)
        self._raw.clear()

    def finish(self) -> str | None:
        """Make the batch one durable pack (one fsync of the pack, one of the directory); returns its
        name, or None if the batch is empty."""
        if not self._rows:
            self.discard()
            return None
        f = self._file
        try:
            f.seek(0)
            f.write(PACK_HEADER.pack(PACK_MAGIC, VERSION, len(self._rows), 0))
            f.flush()
            hasher = blake3.blake3()
            fd = f.fileno()
            pos = 0
            while pos < self._offset:
                chunk = os.pread(fd, min(_CHUNK, self._offset - pos), pos)
                if not chunk:
                    break
                hasher.update(chunk)
                pos += len(chunk)
            trailer = hasher.digest()
            f.seek(self._offset)
            f.write(trailer)
            f.flush()
            if self.fsync:
                os.fsync(fd)
            crash_point("batch:pack-synced")
        finally:
            f.close()
        name = f"pack-{trailer.hex()}"
        idx_path = self.directory / f"{name}.idx"
        tmp_idx = temp_name(idx_path)
        try:
            with open(tmp_idx, "xb") as out:
                out.write(index_bytes(self._rows, trailer))
            # The pack first, as gc's writer does: a reader uses a pack only once its index is there,
            # and a pack left without one by a killed writer gets it rebuilt (see `orphaned_by_dead`).
            os.replace(self.tmp, self.directory / f"{name}.pack")
            crash_point("batch:pack-renamed")
            os.replace(tmp_idx, idx_path)
        finally:
            tmp_idx.unlink(missing_ok=True)
            self.tmp.unlink(missing_ok=True)
        if self.fsync:
            fsync_dir(self.directory)
        crash_point("batch:renamed")
        self._raw.clear()
        return name


def rebuild_index(pack_path: Path, *, fsync: bool = True) -> bool:
    """Rewrite the index of a pack whose own checksum verifies (every entry is re-hashed); each entry
    gets the pack file's mtime. False if the pack itself is damaged."""
    try:
        with open(pack_path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            mtime = int(os.fstat(f.fileno()).st_mtime)
            scan = scan_pack(data)
            rows = [(h, off, crc, mtime) for h, off, crc, _ in scan]
            trailer = scan.trailer
    except (OSError, ValueError, StorageError):
        return False
    idx_path = pack_path.with_suffix(".idx")
    tmp = temp_name(idx_path)
    with open(tmp, "xb") as out:
        out.write(index_bytes(rows, trailer))
        if fsync:
            out.flush()
            os.fsync(out.fileno())
    os.replace(tmp, idx_path)
    if fsync:
        fsync_dir(idx_path.parent)
    return True


def torn_index(pack_path: Path) -> bool:
    """Does the pack's index look like a write a crash cut short (not the size the pack's entry count
    gives, or a whole zeroed page), rather than damage to a complete file?"""
    try:
        with open(pack_path, "rb") as f:
            head = f.read(PACK_HEADER.size)
        data = pack_path.with_suffix(".idx").read_bytes()
    except OSError:
        return False
    if len(head) < PACK_HEADER.size:
        return False
    count = PACK_HEADER.unpack(head)[2]
    if len(data) != IDX_HEADER.size + FANOUT + count * ROW + 2 * TRAILER:
        return True
    zero = bytes(4096)
    return any(data[i : i + 4096] == zero[: len(data[i : i + 4096])] for i in range(0, len(data), 4096))


def _temp_indexes(pack_path: Path) -> list[tuple[Path, int | None]]:
    """The temporary index files writers of this pack hold or left, each with its writer's pid (None
    when the name carries none)."""
    prefix = f".tmp-{pack_path.stem}.idx-"
    try:
        found = [pack_path.parent / n for n in os.listdir(pack_path.parent) if n.startswith(prefix)]
    except OSError:
        return []
    out: list[tuple[Path, int | None]] = []
    for tmp in found:
        pid = tmp.name[len(prefix) :].split("-")[0]
        out.append((tmp, int(pid) if pid.isdigit() else None))
    return out


def orphaned_by_dead(pack_path: Path) -> list[Path]:
    """The temporary index files a writer of this pack left, if every such writer is dead: the pack
    lacks its index because its writer was killed between its two renames. Empty otherwise (no
    temporary index: damage; a live writer: it is about to rename it)."""
    found = _temp_indexes(pack_path)
    if any(pid is None or pid_alive(pid) for _, pid in found):
        return []
    return [tmp for tmp, _ in found]


def index_coming(pack_path: Path) -> bool:
    """Whether a live writer holds a temporary index for this pack: it is between renaming the pack and
    its index, so the index is on its way however long a loaded machine keeps the writer there."""
    return any(pid is not None and pid_alive(pid) for _, pid in _temp_indexes(pack_path))
