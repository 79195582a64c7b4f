"""The floors for `reel push` and `reel clone` over a path remote: the least a Python process can do.

    python3 bench/floor_sync.py push REMOTE REF OLD NEW PACK [MODULES]
    python3 bench/floor_sync.py clone REMOTE COMMIT DIR

Both import what any reel process imports first (click, blake3, zstandard, msgpack, sqlite3) and run
the git child the protocol needs, which git's own push and clone run too. `push` hands git's
receive-pack exactly the pack reel sent (PACK: saved from the remote): the advertisement is read,
one command (REF from OLD to NEW) and the pack are written, the report is read and must say the pack
and the ref are ok. No walk of a store, no pack built. With MODULES (a file naming modules, one a line),
those are imported first and nothing of them is run: the floor of a reel that must load its code.
`clone` asks git's upload-pack for COMMIT,
spools the pack to DIR, inflates every entry once, names it by SHA-1, checks the trailer, reads the
sync commit's trees and checks that every blob BLAKE3-hashes to the reel id it is filed under, then
writes the blobs into one reel pack with the store's own pack writer (`write_pack`, the one part of
reelstore it imports). No decoding into reel objects, no refs, no sync state.
bench/bench_fastpaths.py runs it beside reel and git.
"""

import gc
import hashlib
import importlib
import sqlite3  # noqa: F401  (imported by any reel sync: its state)
import subprocess
import sys
import zlib
from pathlib import Path

import blake3
import click  # noqa: F401, TID251  (the floor imports what every reel command imports; this is no library code)
import msgpack  # noqa: F401
import zstandard  # noqa: F401

TYPES = {1: b"commit", 2: b"tree", 3: b"blob", 4: b"tag"}


def pkt(payload: bytes | None) -> bytes:
    return b"0000" if payload is None else b"%04x" % (len(payload) + 4) + payload


def read_pkt(read) -> bytes | None:
    size = int(read(4), 16)
    return None if size == 0 else read(size - 4)


def lines(read) -> list[bytes]:
    out = []
    while (line := read_pkt(read)) is not None:
        out.append(line)
    return out


def push(remote: str, ref: str, old: str, new: str, pack: str) -> None:
    proc = subprocess.Popen(["git", "receive-pack", remote], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    read = proc.stdout.read
    lines(read)
    proc.stdin.write(pkt(f"{old} {new} {ref}\0report-status quiet".encode()) + pkt(None))
    proc.stdin.write(Path(pack).read_bytes())
    proc.stdin.flush()
    report = lines(read)
    proc.stdin.close()
    proc.wait()
    if report[:1] != [b"unpack ok\n"] or not all(r.startswith(b"ok ") for r in report[1:]):
        sys.exit(f"receive-pack refused: {report}")


def clone(remote: str, commit: str, directory: str) -> None:
    from reelstore.backend.packs.pack_item import PackItem
    from reelstore.backend.packs.pack_write import write_pack
    from reelstore.objects.hash import Hash

    proc = subprocess.Popen(["git", "upload-pack", remote], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    read = proc.stdout.read
    lines(read)
    proc.stdin.write(pkt(f"want {commit} no-progress\n".encode()) + pkt(None) + pkt(b"done\n"))
    proc.stdin.flush()
    if read_pkt(read) != b"NAK\n":
        sys.exit("upload-pack did not answer NAK")
    spool = Path(directory) / "incoming.pack"
    spool.parent.mkdir(parents=True)
    with open(spool, "wb") as f:
        while piece := read(1 << 20):
            f.write(piece)
    proc.wait()
    data = spool.read_bytes()
    if hashlib.sha1(memoryview(data)[:-20]).digest() != data[-20:]:
        sys.exit("bad trailer")
    count = int.from_bytes(data[8:12], "big")
    pos = 12
    objects: dict[bytes, tuple[int, bytes]] = {}
    for _ in range(count):
        c = data[pos]
        kind, size, shift = (c >> 4) & 7, c & 15, 4
        pos += 1
        while c & 0x80:
            c = data[pos]
            pos += 1
            size |= (c & 0x7F) << shift
            shift += 7
        z = zlib.decompressobj()
        end = pos + size + 64 + (size >> 8)
        body = z.decompress(data[pos:end])
        while not z.eof:
            more = data[end : end + (1 << 20)]
            if not more:
                sys.exit("truncated entry")
            end += len(more)
            body += z.decompress(more)
        pos = end - len(z.unused_data)
        if len(body) != size:
            sys.exit("bad entry size")
        objects[hashlib.sha1(TYPES[kind] + b" %d\0" % size + body).digest()] = (kind, body)
    blobs: list[tuple[bytes, bytes]] = []
    root = objects[bytes.fromhex(commit)][1].split(b"\n", 1)[0].split()[1]
    for name, sha in tree(objects, bytes.fromhex(root.decode())):
        if name == b"objects":
            for prefix, shard in tree(objects, sha):
                for rest, blob in tree(objects, shard):
                    raw = objects[blob][1]
                    rid = bytes.fromhex((prefix + rest).decode())
                    if blake3.blake3(raw).digest() != rid:
                        sys.exit("a blob does not hash to its name")
                    blobs.append((rid, raw))
    store = Path(directory) / "objects" / "pack"
    write_pack(store, (PackItem(Hash(rid), raw, 0) for rid, raw in blobs))
    spool.unlink()


def tree(objects: dict[bytes, tuple[int, bytes]], sha: bytes) -> list[tuple[bytes, bytes]]:
    body = objects[sha][1]
    out, pos = [], 0
    while pos < len(body):
        nul = body.index(b"\0", pos)
        out.append((body[body.index(b" ", pos) + 1 : nul], body[nul + 1 : nul + 21]))
        pos = nul + 21
    return out


if __name__ == "__main__":
    try:
        if sys.argv[1] == "push":
            for name in Path(sys.argv[7]).read_text().split() if len(sys.argv) > 7 else []:
                importlib.import_module(name)
            push(*sys.argv[2:7])
        else:
            clone(*sys.argv[2:5])
    finally:
        gc.freeze()  # as reel does: the exit's last collection walks none of what lives to the end
