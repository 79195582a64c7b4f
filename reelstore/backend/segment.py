"""Append-only segments: objects made durable by one append and one fsync of a file that already exists.

The drain journal writes every entry into its trunk's segment (`objects/journal/<trunk>.seg`), so one
journal append (the outcome of effect i and the intent of effect i+1 together) costs one fsync and no
directory fsync. The object store reads segments like packs: every object read is re-hashed.

A segment is a sequence of frames, each written with one `write` of an O_APPEND descriptor:

    magic "RJS1" | payload length (u32 BE) | CRC-32 of the payload (u32 BE) | CRC-32 of the first
    12 bytes (u32 BE) | payload
    payload = one or more of: object length (u32 BE) | the object's canonical bytes

A reader takes whole frames. What follows the last one is either a *torn tail* — shorter than a
header, a valid header whose payload is not all there, or only zero bytes (what a crash leaves of a
write whose fsync never returned; that writer never acted on it): a frame being written right now,
skipped, and cut off by the next writer (under the drain lock, so alone) before it appends — or
*damage*: a complete frame failing a checksum, or a header failing its own. Damage is never cut off:
it is reported (`problem`), and nothing more is appended.

Beside each segment, `<name>.seg.hwm` is its high-water mark: the number of objects and the id of the
newest, rewritten in place after each append's fsync (without one of its own: it survives a killed
process and a copy of the store, which are what take a segment's tail away). A segment holding fewer
objects than its mark, or not holding the one it names, has lost fsynced frames (a partial copy or
restore, a disk that ignored fsync): that is reported as damage too, never taken for "never written".
The mark is read before the segment, and written after it, so a reader never sees a mark ahead of
what it then reads.
"""

from __future__ import annotations

import os
import struct
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path

from reelstore.backend.fileio import fsync_dir, write_all
from reelstore.errors import StorageError
from reelstore.objects import Hash
from reelstore.wording import plural

MAGIC = b"RJS1"
FRAME = struct.Struct(">4sIII")
HEAD = struct.Struct(">4sII")
LENGTH = struct.Struct(">I")
MAX_FRAME = 64 << 20
SUFFIX = ".seg"
MARK_SUFFIX = ".hwm"
MARK = struct.Struct(">4sQ32s")
"""The mark's bytes: magic "RJH1", object count (u64 BE), newest object id."""


class Segment:
    """One segment file: its parsed frames (id -> where) and the appends."""

    def __init__(self, path: Path, *, fsync: bool = True) -> None:
        self.path = path
        self.fsync = fsync
        self.end = 0
        """Bytes parsed: the end of the last whole frame."""
        self.where: dict[Hash, tuple[int, int]] = {}
        """id -> (offset, length) of the object's bytes."""
        self.order: list[Hash] = []
        """Every object id in append order."""
        self.problem: str | None = None
        """Damage before the tail (a bad frame with data after it): nothing past it is read, and no
        append is made, since only the last frame can be torn by a crash."""

    def refresh(self) -> None:
        """Take in the whole frames appended since the last look."""
        mark = self.high_water()
        try:
            size = os.stat(self.path).st_size
        except FileNotFoundError:
            size = 0
        if size > self.end:
            self._parse(size)
        if mark is not None and self.problem is None:
            count, newest = mark
            if len(self.order) < count or newest not in self.where:
                self.problem = (
                    f"{self.path.name} lost fsynced frames: its high-water mark says "
                    f"{plural(count, 'entry')} up to {newest.hex()}, but it holds {len(self.order)}"
                    + (f" up to {self.order[-1].hex()}" if self.order else "")
                )

    @property
    def mark_path(self) -> Path:
        return self.path.with_name(self.path.name + MARK_SUFFIX)

    def high_water(self) -> tuple[int, Hash] | None:
        """(objects, newest id) as the mark says, or None if there is no mark (or it is torn)."""
        try:
            with open(self.mark_path, "rb") as f:
                raw = f.read(MARK.size)
        except FileNotFoundError:
            return None
        if len(raw) != MARK.size:
            return None
        magic, count, newest = MARK.unpack(raw)
        return (count, Hash(newest)) if magic == b"RJH1" else None

    def _parse(self, size: int) -> None:
        with open(self.path, "rb") as f:
            f.seek(self.end)
            data = f.read(size - self.end)
        pos = 0
        while pos + FRAME.size <= len(data):
            magic, length, crc, head_crc = FRAME.unpack_from(data, pos)
            start = pos + FRAME.size
            if zlib.crc32(data[pos : pos + HEAD.size]) != head_crc or magic != MAGIC or length > MAX_FRAME:
                if data[pos:].strip(b"\0"):
                    self.problem = f"{self.path.name}: bad frame header at offset {self.end + pos}"
                break
            if start + length > len(data):
                break
            payload = data[start : start + length]
            found = _objects(payload) if zlib.crc32(payload) == crc else None
            if found is None:
                self.problem = f"{self.path.name}: frame at offset {self.end + pos} fails its checksum"
                break
            for off, n in found:
                h = Hash.of(payload[off : off + n])
                if h not in self.where:
                    self.where[h] = (self.end + start + off, n)
                    self.order.append(h)
            pos = start + length
        self.end += pos

    def _took(self, frame: bytes) -> None:
        """Index the frame this writer just appended at `end` from its own bytes, rather than reading the
        file back (the writer is the only one: the file ended at `end` when it wrote)."""
        payload = memoryview(frame)[FRAME.size :]
        for off, n in _objects(bytes(payload)) or ():
            h = Hash.of(bytes(payload[off : off + n]))
            if h not in self.where:
                self.where[h] = (self.end + FRAME.size + off, n)
                self.order.append(h)
        self.end += len(frame)

    @property
    def tail(self) -> Hash | None:
        """The newest object appended, or None."""
        return self.order[-1] if self.order else None

    def get_raw(self, h: Hash) -> bytes | None:
        at = self.where.get(h)
        if at is None:
            return None
        with open(self.path, "rb") as f:
            raw = os.pread(f.fileno(), at[1], at[0])
        if Hash.of(raw) != h:
            raise StorageError(
                f"object {h.hex()} in {self.path.name} is damaged: content does not hash to its id", id=h
            )
        return raw

    def append(self, raws: Sequence[bytes]) -> None:
        """Append one frame holding `raws` durably: one write, one fsync. The caller holds the lock
        that makes it the only writer; a torn tail a crash left is cut off first."""
        self.refresh()
        if self.problem is not None:
            raise StorageError(f"journal segment is damaged ({self.problem}); nothing was appended")
        created = not self.path.exists()
        if created:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        payload = b"".join(LENGTH.pack(len(r)) + r for r in raws)
        head = HEAD.pack(MAGIC, len(payload), zlib.crc32(payload))
        frame = head + LENGTH.pack(zlib.crc32(head)) + payload
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            if os.fstat(fd).st_size > self.end:
                os.truncate(fd, self.end)
            write_all(fd, frame, fsync=self.fsync)
        finally:
            os.close(fd)
        if created and self.fsync:
            fsync_dir(self.path.parent)
        self._took(frame)
        if self.order:
            fd = os.open(self.mark_path, os.O_WRONLY | os.O_CREAT, 0o644)
            try:
                os.pwrite(fd, MARK.pack(b"RJH1", len(self.order), bytes(self.order[-1])), 0)
            finally:
                os.close(fd)


def _objects(payload: bytes) -> list[tuple[int, int]] | None:
    """(offset, length) of each object in a frame's payload; None if the lengths do not tile it."""
    out, pos = [], 0
    while pos < len(payload):
        if pos + LENGTH.size > len(payload):
            return None
        (n,) = LENGTH.unpack_from(payload, pos)
        pos += LENGTH.size
        if pos + n > len(payload):
            return None
        out.append((pos, n))
        pos += n
    return out


class Segments:
    """Every segment under one directory (`objects/journal`), found by name and rescanned on a miss."""

    def __init__(self, directory: Path, *, fsync: bool = True) -> None:
        self.directory = directory
        self.fsync = fsync
        self._open: dict[str, Segment] = {}

    def segment(self, name: str) -> Segment:
        """The segment called `name` (a trunk name; `/` makes subdirectories), created on first append."""
        seg = self._open.get(name)
        if seg is None:
            seg = self._open[name] = Segment(self.directory / f"{name}{SUFFIX}", fsync=self.fsync)
        return seg

    def _all(self) -> list[Segment]:
        if self.directory.is_dir():
            for dirpath, _, files in os.walk(self.directory):
                for f in files:
                    if f.endswith(SUFFIX):
                        rel = (Path(dirpath) / f).relative_to(self.directory).as_posix()[: -len(SUFFIX)]
                        self.segment(rel)
        return list(self._open.values())

    def find(self, h: Hash) -> Segment | None:
        for seg in self._open.values():
            if h in seg.where:
                return seg
        for seg in self._all():
            seg.refresh()
            if h in seg.where:
                return seg
        return None

    def get_raw(self, h: Hash) -> bytes | None:
        seg = self.find(h)
        return seg.get_raw(h) if seg is not None else None

    def ids(self) -> Iterator[Hash]:
        for seg in self._all():
            seg.refresh()
            yield from seg.order

    def problems(self) -> list[str]:
        """Damage found in any segment (fsck reports it)."""
        out = []
        for seg in self._all():
            seg.refresh()
            if seg.problem is not None:
                out.append(seg.problem)
        return out
