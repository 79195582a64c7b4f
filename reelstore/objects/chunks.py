"""`chunks`: content too large for one blob, as the list of its content-defined pieces.

Content of more than `THRESHOLD` bytes is cut with FastCDC (a gear rolling hash; the `fastcdc`
library's compiled chunker) into pieces of `CHUNK_MIN` to `CHUNK_MAX` bytes, about `CHUNK_AVG` on
average. Each piece is an ordinary `blob`; the `chunks` object lists them in order with their sizes.
A cut depends only on the bytes around it, so an edit moves the boundaries near it and no others:
two versions of a large file share every unchanged piece, as restic's and borg's chunkers do.

`pieces` cuts a stream with bounded memory (a window of `WINDOW` bytes), giving the same cuts as
cutting the whole content at once.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO, ClassVar

from reelstore.errors import BadInput
from reelstore.objects.block import Object, register, v_hash, v_int, v_tuple
from reelstore.objects.hash import Hash

CHUNK_MIN = 256 * 1024
CHUNK_AVG = 1024 * 1024
CHUNK_MAX = 4 * 1024 * 1024
THRESHOLD = CHUNK_MAX
"""Content up to this many bytes is one blob; anything larger is a `chunks` list."""
WINDOW = 4 * CHUNK_MAX
MAX_PARTS = 1 << 20
"""At least CHUNK_MIN bytes each, so a list covers up to 256 GiB; its body stays far below the object limit."""
MAX_SIZE = MAX_PARTS * CHUNK_MAX
MAX_EXPANSION = 4096
"""How many times its distinct pieces a list may repeat them: 16 GiB of one repeated 4 MiB piece (a
file of zeros) passes, while a small crafted list naming one piece a million times (4 TiB to write out
from 4 MiB stored) is refused before anything reads it."""


def _part(value: Any, where: str) -> tuple[Hash, int]:
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise BadInput(f"{where} must be a [hash, size] pair")
    return v_hash(value[0], where), v_int(1, CHUNK_MAX)(value[1], where)


@register
@dataclass(frozen=True)
class Chunks(Object):
    """A large blob: `parts` are (blob id, size) in content order; `size` is their total."""

    kind: ClassVar[str] = "chunks"
    size: int
    parts: tuple[tuple[Hash, int], ...]
    SPEC: ClassVar = {"parts": ("parts", v_tuple(_part, MAX_PARTS)), "size": ("size", v_int(0, MAX_SIZE))}

    def validate(self) -> None:
        if sum(n for _, n in self.parts) != self.size:
            raise BadInput("chunks sizes do not add up to its size")
        if self.size <= THRESHOLD:
            raise BadInput(f"content of {self.size} bytes is a blob, not a chunk list (threshold {THRESHOLD})")
        largest: dict[Hash, int] = {}
        for h, n in self.parts:
            largest[h] = max(n, largest.get(h, 0))
        stored = sum(largest.values())
        if self.size > MAX_EXPANSION * stored:
            raise BadInput(
                f"chunks: {self.size} bytes of content from {stored} bytes of distinct pieces is more "
                f"than {MAX_EXPANSION} times its pieces",
                field="parts",
            )

    def references(self) -> tuple[Hash, ...]:
        return tuple(h for h, _ in self.parts)


def _cuts(window: memoryview, final: bool) -> list[int]:
    """Lengths of the pieces FastCDC cuts from the start of `window` that no later byte can change:
    a cut is final once CHUNK_MAX bytes follow its piece's start, or at the end of the content."""
    from fastcdc.fastcdc_cy import fastcdc_cy  # type: ignore[import-untyped]

    out: list[int] = []
    gen = fastcdc_cy(window, min_size=CHUNK_MIN, avg_size=CHUNK_AVG, max_size=CHUNK_MAX)
    try:
        for chunk in gen:
            if not final and chunk.offset + CHUNK_MAX > len(window):
                break
            out.append(chunk.length)
    finally:
        gen.close()
    return out


def pieces(stream: BinaryIO, head: bytes = b"") -> Iterator[bytes]:
    """The content-defined pieces of `head` followed by the rest of `stream`, holding at most about
    WINDOW bytes at a time."""
    buf = bytearray(head)
    eof = False
    while True:
        while not eof and len(buf) < WINDOW:
            data = stream.read(WINDOW - len(buf))
            if not data:
                eof = True
            buf += data
        if not buf:
            return
        with memoryview(buf) as view:
            lengths = _cuts(view, eof)
        start = 0
        for n in lengths:
            yield bytes(buf[start : start + n])
            start += n
        del buf[:start]
        if eof and not buf:
            return
