"""Type stub of the optional C extension reelstore/backend/packs/_stored_batch.c (see bulk_read.answer)."""

def answer(
    records: bytes,
    start: int,
    sep: int,
    packs: tuple[tuple[object, object, int, int], ...],
    tags: tuple[bytes | None, ...],
    out: bytearray,
    with_content: bool,
    direct: int,
) -> int:
    """Answer the `sep`-ended names in `records` from offset `start` into `out` until one it leaves to the
    caller; the offset where that name starts."""

def crc32(data: bytes | bytearray | memoryview, tables: bool = False) -> int:
    """zlib.crc32(data), as the module computes it (folded, or from tables if `tables`; its tests compare
    both with zlib's)."""

def blake3(inputs: list[bytes]) -> list[bytes]:
    """The BLAKE3 digest of each input (at most 64), hashed as the batch hashes (its tests compare them with
    the blake3 package's)."""
