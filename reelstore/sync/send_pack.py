"""The client side of git's receive-pack protocol (v0/v1), spoken here rather than by dulwich.

dulwich's send-pack writes the pack one record at a time (a Python step, a CRC and a hash update per
object, then a write each) and lives in `dulwich.client`, whose import is a good part of a push's
start-up. The protocol itself is small: read the refs the server advertises, send one command per ref
to move, naming its old and new id (the server compares and swaps each under its ref lock), send the
pack, read the server's report. Here the pack goes out as it lies in `OutgoingPack`, in large writes,
whatever carries the bytes: git's receive-pack spawned for a local repository (no dulwich import at
all), or the connection dulwich opens for ssh:// and git://. The fetch side for a local repository
(git's upload-pack) is here too (`fetch_pack`), so a clone of a path loads no dulwich client either.
"""

from __future__ import annotations

import io
import os
import subprocess
from collections.abc import Callable, Iterator
from typing import IO, TYPE_CHECKING, Protocol, cast

if TYPE_CHECKING:
    from dulwich.errors import GitProtocolError, HangupException

    from reelstore.sync.outgoing import OutgoingPack

ZERO_SHA = b"0" * 40
_NO_REFS = b"capabilities^{}"
_WAIT_S = 60
_MAX_PKT = 65520
_MAX_REPORT_PKTS = 1 << 20
_MAX_ERRORS = 1 << 16
_PIECE = 1 << 16

UpdateRefs = Callable[[dict[bytes, bytes]], dict[bytes, bytes]]
"""Given the refs the server holds, the refs to set (ZERO_SHA deletes); raise to send nothing."""


class Wire(Protocol):
    """Where the protocol's bytes come from and go: `read(n)` returns n bytes, fewer only at the end;
    `write` may take fewer bytes than it is given (a socket's does) and then says how many."""

    def read(self, size: int) -> bytes: ...

    def write(self, data: bytes) -> object: ...


def read_pkt(wire: Wire) -> bytes | None:
    """One pkt-line's payload, or None for a flush-pkt; HangupException if the other end is gone."""
    head = wire.read(4)
    if not head:
        raise _hangup()
    try:
        size = int(head, 16)
    except ValueError:
        raise _protocol_error(f"invalid pkt-line length {head!r}") from None
    if size in (0, 1):
        return None
    if size < 4 or size > _MAX_PKT + 4:
        raise _protocol_error(f"invalid pkt-line length {size}")
    body = wire.read(size - 4)
    if len(body) != size - 4:
        raise _hangup()
    return body


def _protocol_error(message: str) -> GitProtocolError:
    """dulwich's GitProtocolError, the one vocabulary of protocol failures whichever client spoke, its
    module loaded only when something fails (a push that goes well never imports it)."""
    from dulwich.errors import GitProtocolError

    return GitProtocolError(message)


def _hangup(lines: list[bytes] | None = None) -> HangupException:
    """dulwich's HangupException (see `_protocol_error`), quoting the server's `lines` if any."""
    from dulwich.errors import HangupException

    return HangupException(lines)


def pkt(payload: bytes | None) -> bytes:
    """`payload` as a pkt-line (None: a flush-pkt)."""
    return b"0000" if payload is None else b"%04x" % (len(payload) + 4) + payload


def _pkts(wire: Wire) -> Iterator[bytes]:
    """The pkt-lines up to the next flush-pkt (at most _MAX_REPORT_PKTS)."""
    for _ in range(_MAX_REPORT_PKTS):
        line = read_pkt(wire)
        if line is None:
            return
        yield line
    raise _protocol_error("the server sent more lines than any report has")


def advertised(wire: Wire) -> tuple[dict[bytes, bytes], set[bytes]]:
    """The refs the server holds (name → hex id) and the capabilities it offers."""
    refs: dict[bytes, bytes] = {}
    caps: set[bytes] | None = None
    for line in _pkts(wire):
        line = line.rstrip(b"\n")
        if line.startswith(b"ERR "):
            raise _protocol_error(line[4:].decode("utf-8", "replace"))
        if caps is None:
            line, _, offered = line.partition(b"\0")
            caps = set(offered.split())
        sha, _, name = line.partition(b" ")
        refs[name] = sha
    refs.pop(_NO_REFS, None)
    return refs, caps or set()


def send_pack(
    wire: Wire,
    update_refs: UpdateRefs,
    pack: OutgoingPack | None,
    *,
    atomic: bool = False,
    progress: Callable[[bytes], None] | None = None,
    written: Callable[[int], None] | None = None,
) -> dict[bytes, str | None]:
    """Push over `wire`: each ref `update_refs` names moves from what the server advertised to its new
    id, the pack (if anything is set, not only deleted) goes after the commands. Returns each ref's
    fate as the server reports it (None: moved; else its reason). SendPackError if the server could
    not take the pack; GitProtocolError("... atomic ...") if `atomic` was asked of a server without it.
    `written(n)` hears of every n entries of the pack as they go out."""
    old, caps = advertised(wire)
    if atomic and b"atomic" not in caps:
        _writer(wire)(pkt(None))
        raise _protocol_error("the server does not offer atomic pushes")
    try:
        new = update_refs(old)
    except BaseException:
        _writer(wire)(pkt(None))
        raise
    put = _writer(wire)
    changes = {ref: sha for ref, sha in new.items() if old.get(ref, ZERO_SHA) != sha}
    fates: dict[bytes, str | None] = {}
    if b"delete-refs" not in caps:
        for ref in [r for r, sha in changes.items() if sha == ZERO_SHA]:
            fates[ref] = "remote does not support deleting refs"
            del changes[ref]
    if not changes:
        put(pkt(None))
        return fates
    wanted = [b"report-status", b"side-band-64k", b"quiet", b"delete-refs"] + ([b"atomic"] if atomic else [])
    asked = b" ".join([c for c in wanted if c in caps] + [b"agent=reelstore"])
    commands = []
    for i, (ref, sha) in enumerate(sorted(changes.items())):
        line = old.get(ref, ZERO_SHA) + b" " + sha + b" " + ref
        commands.append(pkt(line + b"\0" + asked if i == 0 else line))
    commands.append(pkt(None))
    put(b"".join(commands))
    if pack is not None and any(sha != ZERO_SHA for sha in changes.values()):
        pack.write_to(put, written)
    if b"report-status" not in caps:
        return fates
    report = _report(wire, b"side-band-64k" in caps, progress)
    fates.update(report)
    return fates


def _writer(wire: Wire) -> Callable[[bytes], None]:
    """A write of every byte to `wire`, whose own write may take fewer."""

    def put(data: bytes) -> None:
        for _ in range(len(data) + 1):
            n = wire.write(data)
            if not isinstance(n, int) or n >= len(data):
                return
            if n <= 0:
                raise BrokenPipeError("the remote stopped reading")
            data = data[n:]

    return put


def _side_band(part: bytes, data: Callable[[bytes], object], progress: Callable[[bytes], None] | None) -> None:
    """One side-band-64k line: channel 1 is data, 2 progress, 3 the server's fatal error."""
    channel, body = part[:1], part[1:]
    if channel == b"\x01":
        data(body)
    elif channel == b"\x02":
        if progress is not None:
            progress(body)
    elif channel == b"\x03":
        raise _protocol_error(body.decode("utf-8", "replace"))
    else:
        raise _protocol_error(f"the server used an unknown side-band channel {channel!r}")


def _report(wire: Wire, sideband: bool, progress: Callable[[bytes], None] | None) -> dict[bytes, str | None]:
    """The server's report-status (unpacked from the side band if it uses one): each ref's fate."""
    lines: list[bytes] = []
    if sideband:
        data = bytearray()
        for part in _pkts(wire):
            _side_band(part, data.extend, progress)
        lines = list(_pkts(io.BytesIO(bytes(data))))
    else:
        lines = list(_pkts(wire))
    if not lines:
        raise _protocol_error("the server sent no report of the push")
    unpack = lines[0].strip()
    if unpack != b"unpack ok":
        from dulwich.errors import SendPackError

        raise SendPackError(unpack)
    fates: dict[bytes, str | None] = {}
    for line in lines[1:]:
        status, _, rest = line.strip().partition(b" ")
        if status == b"ok":
            fates[rest] = None
        elif status == b"ng":
            ref, _, why = rest.partition(b" ")
            fates[ref] = why.decode("utf-8", "replace")
        else:
            raise _protocol_error(f"the server reported a ref as {status!r}")
    return fates


def hung_up(errors: IO[bytes] | None) -> Exception:
    """What to raise when the server hung up, in its own words from its error output: an `ERROR:` line
    is a refusal (GitProtocolError), anything else is quoted in a HangupException."""
    if errors is None:
        return _hangup()
    lines = [line.rstrip(b"\n") for line in errors.read(_MAX_ERRORS).splitlines()]
    for line in lines:
        if line.startswith(b"ERROR: "):
            return _protocol_error(line[len(b"ERROR: ") :].decode("utf-8", "replace"))
    return _hangup(lines)


def error_file(memfd: Callable[[str], int] | None = getattr(os, "memfd_create", None)) -> IO[bytes]:
    """An anonymous file to take a child's error output: a memfd where the system has one (no import of
    tempfile and shutil, and no probe of the temporary directory on every push), else a
    temporary file. A file, not a pipe: the child can never block on it while we write to its input."""
    if memfd is not None:
        try:
            return open(memfd("reel-git-errors"), "w+b")
        except OSError:
            pass
    import tempfile

    return tempfile.TemporaryFile()


class GitService:
    """git's receive-pack or upload-pack for a local repository, spawned as git's own push and fetch spawn
    them; its error output goes to a file, so it can never block on a full pipe, and is quoted if it
    hangs up."""

    def __init__(self, service: str, path: str) -> None:
        self.errors: IO[bytes] = error_file()
        try:
            self.proc = subprocess.Popen(
                ["git", service, path], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.errors, bufsize=0
            )
        except BaseException:
            self.errors.close()
            raise
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._in = self.proc.stdin
        self._out = io.BufferedReader(cast(io.RawIOBase, self.proc.stdout))

    def read(self, size: int) -> bytes:
        return self._out.read(size)

    def write(self, data: bytes) -> int | None:
        return self._in.write(data)

    def hung_up(self) -> Exception:
        """What to raise when it hung up: see `hung_up`."""
        self.close()
        self.errors.seek(0)
        return hung_up(self.errors)

    def close(self) -> None:
        for pipe in (self._in, self._out):
            try:
                pipe.close()
            except OSError:
                pass
        try:
            self.proc.wait(_WAIT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self) -> GitService:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
        self.errors.close()


def fetch_pack(
    wire: Wire,
    determine_wants: Callable[[dict[bytes, bytes]], list[bytes]],
    haves: list[bytes],
    write: Callable[[bytes], object],
    progress: Callable[[bytes], None] | None = None,
    budget: int = 1 << 40,
) -> None:
    """Fetch over `wire` from git's upload-pack (protocol v0, no multi-ack): the ids `determine_wants`
    picks from the advertised refs, telling the server the commits in `haves`; the pack goes to `write`
    as it arrives (nothing, if nothing is wanted). Thin packs are not asked for. At most `budget` bytes
    are read (the caller's own limit on the pack stops it sooner)."""
    refs, caps = advertised(wire)
    wants = determine_wants(refs)
    put = _writer(wire)
    if not wants:
        put(pkt(None))
        return
    wanted = [b"side-band-64k", b"ofs-delta"]
    asked = b" ".join([c for c in wanted if c in caps] + [b"agent=reelstore"])
    lines = [pkt(b"want " + sha + (b" " + asked if i == 0 else b"") + b"\n") for i, sha in enumerate(wants)]
    lines.append(pkt(None))
    lines += [pkt(b"have " + sha + b"\n") for sha in haves]
    lines.append(pkt(b"done\n"))
    put(b"".join(lines))
    answer = read_pkt(wire)  # without multi-ack: one ACK (a have was common) or NAK
    if answer is None or not (answer.startswith(b"ACK ") or answer.rstrip(b"\n") == b"NAK"):
        raise _protocol_error(f"the server answered the negotiation with {answer!r}")
    if b"side-band-64k" not in caps:
        for _ in range(budget // _PIECE + 1):
            piece = wire.read(_PIECE)
            if not piece:
                return
            write(piece)
        raise _protocol_error("the server sent more than any pack")
    for _ in range(budget // 5 + 1):  # every side-band line is at least 5 bytes long
        part = read_pkt(wire)
        if part is None:
            return
        _side_band(part, write, progress)
    raise _protocol_error("the server sent more than any pack")


def list_refs(wire: Wire) -> dict[bytes, bytes]:
    """The refs git's upload-pack advertises, ending the conversation there."""
    refs, _ = advertised(wire)
    _writer(wire)(pkt(None))
    return refs
