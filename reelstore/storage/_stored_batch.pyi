"""Type stub of the optional C extension reelstore/storage/_stored_batch.c (see bulk_read.answer)."""

from blake3 import blake3

def answer(names: list[bytes], start: int, packs: tuple[tuple[object, object, int, int], ...],
           tags: tuple[bytes | None, ...], hasher: blake3, out: bytearray, with_content: bool, direct: int) -> int:
    """Answer names[start:] into `out` until one it leaves to the caller; that name's index."""

def crc32(data: bytes | bytearray | memoryview) -> int:
    """zlib.crc32(data), as the module computes it (its tests compare the two)."""
