"""Reading a received pack: every object in it, deltas resolved, one at a time (E007 if damaged).

Sizes are checked first, before anything inflates (`pack_budget`): a crafted pack cannot make us, or
git, allocate more than one object's limit. A pack without deltas is read in that same pass. One with
deltas is read, where a `git` executable is present, by git, which was built for it: `git index-pack`
checks the pack's checksum and every object's SHA-1 and resolves deltas, and `git cat-file
--batch-all-objects` streams the objects out. Without git, dulwich reads it in Python. Either way
only small objects and the git structure stay in memory: a blob over HELD_RAW that decodes as a reel
blob goes to a staging store.
"""

from __future__ import annotations

import hashlib
import mmap
import os
import shutil
import struct
import subprocess
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING

from reelstore.backend.object_store import ObjectStore
from reelstore.codec import MAX_OBJECT_SIZE, MAX_TAG
from reelstore.errors import BadInput, StorageError
from reelstore.objects import Hash, decode
from reelstore.sync.pack_budget import check_sizes

if TYPE_CHECKING:
    from dulwich.pack import PackData

MAX_RAW = MAX_OBJECT_SIZE + MAX_TAG + 1
HELD_RAW = 64 * 1024
"""Received blobs up to this size are held in memory until the fetch is verified; larger reel blobs wait
in a staging store."""
MAX_HELD = 512 * 1024 * 1024
"""Most bytes a fetch holds in memory for blobs it cannot stage (small ones, and any that are not reel blobs)."""
_BLOB_TAG = b"blob\x00"
_RELEASE_EVERY = 32 * 1024 * 1024
_TYPES = {b"commit": 1, b"tree": 2, b"blob": 3, b"tag": 4}
TYPE_NAMES = {n: name for name, n in _TYPES.items()}
_HEADS = {n: name + b" " for n, name in TYPE_NAMES.items()}
_GIT_BLOB = _TYPES[b"blob"]


@dataclass
class ReceivedPack:
    """A received pack, read one object at a time, every object by its binary git id: commits, trees
    and tags as (git type number, bytes), small blobs' bytes, and the large blobs that decode as reel
    blobs moved to a staging store (git id -> reel id)."""

    meta: dict[bytes, tuple[int, bytes]] = field(default_factory=dict)
    raws: dict[bytes, bytes] = field(default_factory=dict)
    staged: dict[bytes, Hash] = field(default_factory=dict)
    staging: ObjectStore | None = None
    held: int = 0

    def __contains__(self, sha: object) -> bool:
        return sha in self.meta or sha in self.raws or sha in self.staged

    def take_entry(self, kind: int, raw: bytes) -> None:
        """File a whole object read straight from the pack, named here by its SHA-1."""
        digest = hashlib.sha1(b"%s%d\0" % (_HEADS[kind], len(raw)))
        digest.update(raw)
        self.take(digest.digest(), kind, raw)

    def take(self, sha: bytes, kind: int, raw: bytes) -> None:
        """File one object of the pack (binary git id, git type number, its bytes). Commits and trees are
        kept as bytes: `unpack` reads the few it needs."""
        if kind != _GIT_BLOB:
            self.meta[sha] = (kind, raw)
            return
        if self.staging is not None and len(raw) > HELD_RAW and raw.startswith(_BLOB_TAG):
            try:
                blob = decode(raw)
            except BadInput:
                blob = None
            if blob is not None:
                self.staging.put(blob)
                self.staged[sha] = blob.id
                return
        self.held += len(raw)
        if self.held > MAX_HELD:
            raise StorageError(f"the remote sent more than {MAX_HELD} bytes that are not reel content")
        self.raws[sha] = raw


def git_tools() -> bool:
    """Is a `git` executable on PATH to index received packs?"""
    return shutil.which("git") is not None


def read_pack(path: Path, staging: ObjectStore | None = None) -> ReceivedPack:
    """Every object of the pack file at `path` (see the module doc); E007 if the pack is damaged.

    A pack without deltas (what a reel push sends) is read in the pass that checks its sizes, each
    object inflated once and named by its SHA-1 here. One with deltas (a remote that git repacked) is
    read by git, or by dulwich without git."""
    got = ReceivedPack(staging=staging)
    size = path.stat().st_size
    if size == 0:
        return got
    with path.open("rb") as stream:
        if not check_sizes(stream, size, MAX_RAW, got.take_entry):
            return got
        got = ReceivedPack(staging=staging)
        if git_tools():
            _read_with_git(path, got)
        else:
            _read_with_dulwich(stream, size, got)
    return got


def _read_with_git(path: Path, got: ReceivedPack) -> None:
    """`git index-pack` verifies and indexes the pack in a scratch repository beside it, then `git
    cat-file` streams its objects."""
    gitdir = path.with_suffix(".git")
    packs = gitdir / "objects" / "pack"
    pack = packs / "pack-received.pack"
    env = {**os.environ, "GIT_DIR": str(gitdir)}
    try:
        packs.mkdir(parents=True)
        (gitdir / "refs").mkdir()
        (gitdir / "HEAD").write_bytes(b"ref: refs/heads/main\n")
        os.replace(path, pack)
        indexed = subprocess.run(["git", "index-pack", str(pack)], env=env, capture_output=True, check=False)
        if indexed.returncode != 0:
            said = indexed.stderr.decode("utf-8", "replace").strip()
            raise StorageError(f"the remote sent a damaged pack: git index-pack: {said}")
        _stream_objects(env, got)
    finally:
        if pack.exists():
            os.replace(pack, path)
        shutil.rmtree(gitdir, ignore_errors=True)


def _stream_objects(env: dict[str, str], got: ReceivedPack) -> None:
    cmd = ["git", "cat-file", "--batch-all-objects", "--batch", "--unordered"]
    with subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        out = proc.stdout
        try:
            while True:
                line = out.readline(256)
                if not line:
                    break
                sha, kind, size = _batch_header(line)
                raw = out.read(size)
                if len(raw) != size or out.read(1) != b"\n":
                    raise StorageError("git cat-file ended an object early")
                got.take(sha, kind, raw)
        finally:
            out.close()
            said = proc.stderr.read().decode("utf-8", "replace").strip()
            code = proc.wait()
        if code != 0:
            raise StorageError(f"the remote sent a pack git cannot read: git cat-file: {said}")


def _batch_header(line: bytes) -> tuple[bytes, int, int]:
    """`<sha> <type> <size>` from `git cat-file --batch` (the id made binary)."""
    parts = line.split()
    if (
        len(parts) != 3
        or len(parts[0]) != 40
        or parts[1] not in _TYPES
        or not parts[2].isdigit()
        or int(parts[2]) > MAX_RAW
    ):
        raise StorageError(f"git cat-file answered {line[:120]!r}")
    try:
        sha = bytes.fromhex(parts[0].decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        raise StorageError(f"git cat-file answered {line[:120]!r}") from None
    return sha, _TYPES[parts[1]], int(parts[2])


def _read_with_dulwich(stream: IO[bytes], size: int, got: ReceivedPack) -> None:
    """Without git: dulwich resolves the deltas in Python (its pack code is loaded only here)."""
    from dulwich.errors import ApplyDeltaError, ChecksumMismatch, FileFormatException
    from dulwich.object_format import DEFAULT_OBJECT_FORMAT
    from dulwich.pack import PackData, PackInflater

    damage = (
        ChecksumMismatch,
        ApplyDeltaError,
        FileFormatException,
        zlib.error,
        struct.error,
        KeyError,
        ValueError,
        AssertionError,
        EOFError,
        OSError,
    )
    data = None
    try:
        _check_trailer(stream, size)
        data = PackData.from_file(stream, DEFAULT_OBJECT_FORMAT, size)
        mapped = _mapping(data)
        walker = PackInflater(None, data.object_format.hash_func, object_format=data.object_format)
        walker.set_pack_data(data)
        read = 0
        for unpacked in data.iter_unpacked(include_comp=False):
            walker.record(unpacked)
            read += unpacked.decomp_len or 0
            if read >= _RELEASE_EVERY:
                mapped()
                read = 0
        mapped()
        for obj in walker:
            read += obj.raw_length()
            if read >= _RELEASE_EVERY:
                mapped()
                read = 0
            got.take(bytes.fromhex(obj.id.decode("ascii")), obj.type_num, obj.as_raw_string())
    except damage as exc:
        raise StorageError(f"the remote sent a damaged pack: {type(exc).__name__}: {exc}") from None
    finally:
        if data is not None:
            data.close()


def _check_trailer(stream: IO[bytes], size: int) -> None:
    """The pack's SHA-1 trailer, computed by reading the file a piece at a time (dulwich's own check
    hashes its map of the file in one pass, which makes the whole pack resident at once)."""
    if size < 32:
        raise StorageError("the remote sent a truncated pack")
    stream.seek(0)
    digest = hashlib.sha1()
    left = size - 20
    while left:
        piece = stream.read(min(left, 8 << 20))
        if not piece:
            raise StorageError("the remote sent a truncated pack")
        digest.update(piece)
        left -= len(piece)
    if stream.read(20) != digest.digest():
        raise StorageError("the remote sent a damaged pack: its checksum does not match")
    stream.seek(0)


def _mapping(data: PackData) -> Callable[[], None]:
    """A way to let go of the pages of dulwich's map of the spooled pack (it maps the file and
    reads every object through the map): without it, a fetch's resident memory would grow to the
    pack's size although each object is dropped once read."""
    contents = getattr(data, "_contents", None)

    def release() -> None:
        if isinstance(contents, mmap.mmap):
            contents.madvise(mmap.MADV_DONTNEED)

    return release
