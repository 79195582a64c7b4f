"""Objects that make a pack use every method, for the tests that read packs back."""

from __future__ import annotations

from reelstore.objects import Blob, Record, Tree


def every_method() -> list[Blob | Tree | Record]:
    """Small records (the pack trains a dictionary for them), versions of one text (deltas), one large
    and one empty blob, so every pack method is read."""
    text = [b"line %d of the text\n" % i for i in range(400)]
    versions = []
    for v in range(6):
        text[v * 7] = b"changed in version %d\n" % v
        versions.append(Blob(b"".join(text)))
    records = [Record(None, Tree(0, ()).id, author="ann", message=f"change {i}", time=i) for i in range(300)]
    return [*records, *versions, Blob(b""), Blob(bytes(range(256)) * 400), Tree(0, ())]
