"""Bundles: a store's refs and everything they reach in one file, byte-deterministic, so two
stores can compare archives by their bytes.

Two stores holding the same objects and refs write the same bytes, whatever order the objects
arrived in, loose or packed, because nothing in the file depends on how a store keeps them:

    REELBUNDLE 1\\n
    <64 hex> <ref name>\\n            one line per ref, sorted by name (bytewise)
    \\n
    <32-byte id> <u32 big-endian n> <n bytes>     one entry per object, sorted by id (bytewise);
                                   the bytes are a zstd frame (level 3, content size, no checksum,
                                   no dictionary) of the object's canonical bytes
    <32 zero bytes>                 end of objects
    <32-byte BLAKE3 of every byte before it>

Reading trusts nothing: every size is bounded before anything is inflated, every object is re-hashed
and decoded, ids must ascend strictly, every ref's closure must be in the file and the trailer must
match. The file is read and written as a stream: memory holds the ids, never the objects.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import blake3
import zstandard

from reelstore.backend.repo import Repo
from reelstore.codec import MAX_OBJECT_SIZE, MAX_TAG
from reelstore.errors import BadInput, NotFound, StorageError
from reelstore.maintenance.reach import walk
from reelstore.objects import HASH_SIZE, Hash, Object, View, decode
from reelstore.objects.ref import check_ref_name

MAGIC = b"REELBUNDLE 1\n"
DEFAULT_REFS = ("refs/heads/", "refs/views/", "refs/snapshots/")
"""What `bundle create` takes without REF arguments: trunks, live views and snapshots. A store's
drain journal stays its own, as with sync: which effects a store sent is that store's record."""
END = bytes(HASH_SIZE)
MAX_REFS = 1 << 20
_MAX_FRAME = MAX_OBJECT_SIZE + MAX_TAG + 1 + 1024
_BATCH, _BATCH_BYTES = 2000, 32 << 20
"""Objects stored per write while unbundling: one pack-sized write, not one fsync per object."""
_REF_LINE = re.compile(rb"([0-9a-f]{64}) (\S{1,4096})\n")


@dataclass
class BundleInfo:
    refs: list[tuple[str, Hash]] = field(default_factory=list)
    objects: int = 0
    size: int = 0
    digest: str = ""
    """The trailer: BLAKE3 of the file before it, hex."""

    def to_json(self) -> dict[str, object]:
        return {
            "refs": {name: h.hex() for name, h in self.refs},
            "objects": self.objects,
            "bytes": self.size,
            "blake3": self.digest,
        }


def select_refs(repo: Repo, names: Iterable[str] = ()) -> list[tuple[str, Hash]]:
    """The refs a bundle of `names` holds: each name as a full ref or as something `repo.ref_name`
    resolves (a trunk, a view); none given means every trunk, live view and snapshot."""
    chosen: dict[str, Hash] = {}
    wanted = list(names)
    if not wanted:
        for name, h in repo.refs.list("refs/"):
            if name.startswith(DEFAULT_REFS):
                chosen[name] = h
    for name in wanted:
        full = name if name.startswith("refs/") else repo.ref_name(name)
        value = repo.refs.get(full) if full else None
        if full is None or value is None:
            raise NotFound(f"no ref {name!r}", ref=name)
        chosen[full] = value
    return sorted(chosen.items(), key=lambda item: item[0].encode())


def create(repo: Repo, path: Path | str, names: Iterable[str] = ()) -> BundleInfo:
    """Write a bundle of `names` (see `select_refs`) to `path` atomically (temp file, then rename).
    E007 if a ref's closure is incomplete in this store: a bundle is always whole."""
    refs = select_refs(repo, names)
    reached = walk(repo.objects, [(name, h) for name, h in refs])
    if not reached.complete:
        missing = next(iter(reached.missing), None) or next(iter(reached.damaged))
        raise StorageError(f"cannot bundle: object {missing.hex()} of the closure is missing or damaged", id=missing)
    target = Path(path)
    tmp = target.with_name(f".{target.name}.tmp")
    info = BundleInfo(refs=refs, objects=len(reached.reachable))
    hasher = blake3.blake3()
    compressor = zstandard.ZstdCompressor(level=3, write_content_size=True, write_checksum=False, threads=0)
    with open(tmp, "wb") as raw_out:
        out = _Hashing(raw_out, hasher)
        out.write(MAGIC)
        for name, h in refs:
            out.write(f"{h.hex()} {name}\n".encode())
        out.write(b"\n")
        for h in sorted(reached.reachable, key=bytes):
            frame = compressor.compress(repo.objects.get_raw(h))
            out.write(bytes(h) + len(frame).to_bytes(4, "big") + frame)
        out.write(END)
        digest = hasher.digest()
        raw_out.write(digest)
        raw_out.flush()
        info.size = out.count + len(digest)
    tmp.replace(target)
    info.digest = digest.hex()
    return info


def verify(path: Path | str) -> BundleInfo:
    """Read a whole bundle and check everything (E014 on any fault, naming it); store nothing."""
    return _read(path, None)


def unbundle(repo: Repo, path: Path | str) -> BundleInfo:
    """Verify the bundle while storing its objects (each re-hashed and decoded on the way in). Refs
    are not moved: the caller decides (`reel bundle unbundle --update-refs`)."""
    return _read(path, repo)


@dataclass
class RefUpdateReport:
    created: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    conflicting: list[str] = field(default_factory=list)
    """Refs this store already has at another object: left as they are."""
    held_back: list[str] = field(default_factory=list)
    """Live views and snapshots with pending effects, not made live here (see `update_refs`)."""


def update_refs(repo: Repo, info: BundleInfo, *, pending_effects: bool = False) -> RefUpdateReport:
    """Create each of the bundle's refs that this store lacks (compare-and-swap from absent).

    A live view or a snapshot holding pending effects is held back unless `pending_effects`: made live
    (or restorable) in two stores, its effects could be committed, and fire, from both. Restoring a
    lost store from its bundle is the case for the flag; its objects are stored either way."""
    for name, h in info.refs:
        _creatable(repo, name, h)
    report = RefUpdateReport()
    for name, h in info.refs:
        current = repo.refs.get(name)
        if current == h:
            report.unchanged.append(name)
        elif current is not None:
            report.conflicting.append(name)
        elif (
            name.startswith(("refs/views/", "refs/snapshots/"))
            and not pending_effects
            and repo.objects.get_as(h, View).effects
        ):
            report.held_back.append(name)
        else:
            repo.refs.set(name, h, None, message="bundle unbundle")
            report.created.append(name)
    return report


CREATABLE = {"refs/heads/": "record", "refs/views/": "view", "refs/snapshots/": "view"}
"""The refs a bundle may create, by prefix, and the kind of object each must name. Drain refs,
remote-tracking refs and anything else are this store's own: a bundle that could create them could
make `reel ops` or `reel recover` read another store's journal, or fail for the whole store."""


def _creatable(repo: Repo, name: str, h: Hash) -> None:
    """E014, before any ref is created, unless the bundle may create `name` at object `h`."""
    want = next((kind for prefix, kind in CREATABLE.items() if name.startswith(prefix)), None)
    if want is None:
        raise BadInput(
            f"the bundle holds {name}; a bundle creates only refs/heads/*, refs/views/* and "
            "refs/snapshots/*, so no ref was created (its objects are stored)",
            ref=name,
        )
    kind = repo.objects.get(h).kind
    if kind != want:
        raise BadInput(f"the bundle's {name} names a {kind} ({h.hex()}), not a {want}; no ref was created", ref=name)


class _Hashing:
    """A write-through that hashes and counts what it writes."""

    def __init__(self, out: BinaryIO, hasher: blake3.blake3) -> None:
        self.out, self.hasher, self.count = out, hasher, 0

    def write(self, data: bytes) -> None:
        self.out.write(data)
        self.hasher.update(data)
        self.count += len(data)


class _Reader:
    """Exact reads from a bundle, hashed as they go; a short read is E014 (a truncated bundle)."""

    def __init__(self, f: BinaryIO, where: str) -> None:
        self.f, self.where, self.hasher, self.count = f, where, blake3.blake3(), 0

    def take(self, n: int, what: str) -> bytes:
        data = self.f.read(n)
        if len(data) != n:
            raise BadInput(f"{self.where}: truncated bundle (while reading {what})")
        self.hasher.update(data)
        self.count += n
        return data

    def line(self, limit: int) -> bytes:
        data = self.f.readline(limit)
        self.hasher.update(data)
        self.count += len(data)
        return data


def _read(path: Path | str, repo: Repo | None) -> BundleInfo:
    where = str(path)
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        raise NotFound(f"no bundle file {where}", path=where) from None
    except IsADirectoryError:
        raise BadInput(f"{where} is a directory, not a bundle", path=where) from None
    except PermissionError:
        raise BadInput(f"cannot read {where}: permission denied", path=where) from None
    with f:
        r = _Reader(f, where)
        if r.take(len(MAGIC), "the header") != MAGIC:
            raise BadInput(f"{where} is not a reel bundle (bad header)")
        info = BundleInfo(refs=_read_refs(r))
        present: set[Hash] = set()
        referenced: dict[Hash, str] = {h: name for name, h in info.refs}
        previous = b""
        inflate = zstandard.ZstdDecompressor()
        batch: list[Object] = []
        batch_bytes = 0
        for h, raw in _objects(r, inflate):
            if bytes(h) <= previous:
                raise BadInput(f"{where}: objects out of order at {h.hex()} (ids must ascend)")
            previous = bytes(h)
            if Hash.of(raw) != h:
                raise BadInput(f"{where}: object {h.hex()} does not hash to its id")
            obj = decode(raw)
            present.add(h)
            for child in obj.references():
                referenced.setdefault(child, h.hex())
            if repo is not None:
                batch.append(obj)
                batch_bytes += len(raw)
                if len(batch) >= _BATCH or batch_bytes >= _BATCH_BYTES:
                    repo.objects.put_many(batch)
                    batch, batch_bytes = [], 0
        if repo is not None and batch:
            repo.objects.put_many(batch)
        info.objects = len(present)
        trailer = f.read(HASH_SIZE + 1)
        if len(trailer) != HASH_SIZE or trailer != r.hasher.digest():
            raise BadInput(f"{where}: the trailer checksum does not match (damaged or truncated bundle)")
        info.size = r.count + HASH_SIZE
        info.digest = trailer.hex()
        absent = [h for h in referenced if h not in present]
        if absent:
            raise BadInput(
                f"{where}: incomplete bundle: object {absent[0].hex()} (referenced by "
                f"{referenced[absent[0]]}) is not in it"
            )
    return info


def _read_refs(r: _Reader) -> list[tuple[str, Hash]]:
    refs: list[tuple[str, Hash]] = []
    while True:
        line = r.line(4096 + 66)
        if line == b"\n":
            return refs
        m = _REF_LINE.fullmatch(line)
        if m is None or len(refs) >= MAX_REFS:
            raise BadInput(f"{r.where}: malformed ref line {line[:80]!r}")
        try:
            name = check_ref_name(m.group(2).decode("utf-8"))
        except (UnicodeDecodeError, BadInput):
            raise BadInput(f"{r.where}: bad ref name {m.group(2)[:80]!r}") from None
        if refs and name.encode() <= refs[-1][0].encode():
            raise BadInput(f"{r.where}: refs out of order at {name} (names must ascend)")
        refs.append((name, Hash.from_hex(m.group(1).decode())))


def _objects(r: _Reader, inflate: zstandard.ZstdDecompressor) -> Iterator[tuple[Hash, bytes]]:
    while True:
        raw_id = r.take(HASH_SIZE, "an object id")
        if raw_id == END:
            return
        h = Hash(raw_id)
        n = int.from_bytes(r.take(4, "an object length"), "big")
        if n > _MAX_FRAME:
            raise BadInput(f"{r.where}: object {h.hex()} claims {n} bytes, past the object size limit")
        frame = r.take(n, f"object {h.hex()}")
        try:
            params = zstandard.get_frame_parameters(frame)
        except zstandard.ZstdError:
            raise BadInput(f"{r.where}: object {h.hex()} is not a zstd frame") from None
        if params.content_size > _MAX_FRAME or params.content_size == zstandard.CONTENTSIZE_UNKNOWN:
            raise BadInput(f"{r.where}: object {h.hex()} declares no size or one past the limit")
        try:
            raw = inflate.decompress(frame, max_output_size=params.content_size)
            whole = inflate.decompressobj()
            whole.decompress(frame)  # bounded: the call above inflated this frame within its size
        except zstandard.ZstdError as err:
            raise BadInput(f"{r.where}: object {h.hex()} does not inflate: {err}") from None
        if not whole.eof or whole.unused_data:
            raise BadInput(f"{r.where}: object {h.hex()} is not exactly one zstd frame (bytes follow it)")
        yield h, raw
