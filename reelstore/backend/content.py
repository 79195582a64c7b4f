"""Content of any size in and out of an object store, with bounded memory.

Up to `THRESHOLD` bytes, content is one `blob`. Beyond that it is cut into content-defined pieces
(`objects.chunks`), stored as blobs a batch at a time, and named by the `chunks` object that lists
them. Reading goes the other way, one piece at a time, each re-hashed by the store and checked
against the size the list declares, so a reader never holds more than one piece.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import BinaryIO

from reelstore.backend.object_store import ObjectStore
from reelstore.errors import StorageError
from reelstore.objects import Blob, Chunks, Hash, Object
from reelstore.objects.chunks import THRESHOLD, pieces

BATCH_BYTES = 16 * 1024 * 1024
"""Pieces are handed to the store in batches of about this many bytes."""


def write(store: ObjectStore | None, stream: BinaryIO) -> tuple[Hash, int]:
    """Store everything `stream` yields (with `store` None: only compute its id); (id, size)."""
    head = _read_up_to(stream, THRESHOLD + 1)
    if len(head) <= THRESHOLD:
        blob = Blob(head)
        if store is not None:
            store.put(blob)
        return blob.id, len(head)
    parts: list[tuple[Hash, int]] = []
    batch: list[Object] = []
    pending = 0
    for piece in pieces(stream, head):
        blob = Blob(piece)
        parts.append((blob.id, len(piece)))
        if store is not None:
            batch.append(blob)
            pending += len(piece)
            if pending >= BATCH_BYTES:
                store.put_many(batch)
                batch, pending = [], 0
    listing = Chunks(sum(n for _, n in parts), tuple(parts))
    if store is not None:
        store.put_many([*batch, listing])
    return listing.id, listing.size


def write_bytes(store: ObjectStore | None, data: bytes) -> Hash:
    """`write` for content already in memory."""
    return write(store, io.BytesIO(data))[0]


def is_content(obj: Object) -> bool:
    return isinstance(obj, (Blob, Chunks))


def read(store: ObjectStore, h: Hash) -> Iterator[bytes]:
    """The content named `h` (a blob or a chunk list), piece by piece (E007 if it is another kind or
    a piece disagrees with its list)."""
    obj = store.get(h)
    if isinstance(obj, Blob):
        yield obj.data
        return
    if not isinstance(obj, Chunks):
        raise StorageError(f"object {h.hex()} is a {obj.kind}, not content (a blob or a chunk list)", id=h)
    for part, size in obj.parts:
        piece = store.get_as(part, Blob).data
        if len(piece) != size:
            raise StorageError(f"piece {part.hex()} of {h.hex()} holds {len(piece)} bytes, its list says {size}", id=h)
        yield piece


def read_all(store: ObjectStore, h: Hash) -> bytes:
    return b"".join(read(store, h))


def size(store: ObjectStore, h: Hash) -> int:
    """The content size of blob or chunk list `h`, without reading its pieces."""
    obj = store.get(h)
    if isinstance(obj, Blob):
        return len(obj.data)
    if isinstance(obj, Chunks):
        return obj.size
    raise StorageError(f"object {h.hex()} is a {obj.kind}, not content (a blob or a chunk list)", id=h)


def _read_up_to(stream: BinaryIO, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        data = stream.read(n - len(out))
        if not data:
            break
        out += data
    return bytes(out)
