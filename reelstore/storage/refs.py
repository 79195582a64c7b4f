"""Ref (reel type 3 of 6): a name under `refs/` pointing at an object id.

Every change is a compare-and-swap against an expected old value, taken under a lock file as git does
it: create `NAME.lock` exclusively (it names its holder: pid, host, time), re-read the ref under the
lock, compare, write and fsync the new value into a temporary file, log it, rename that over the ref,
remove the lock. A multi-ref transaction locks every
ref (in name order) and checks every old value before it writes anything, so a failed check changes
nothing. A lock that is already there is reported, never broken by a writer: it may belong to a live one. A
lock whose holder is provably dead (a process of this host that no longer runs), or that is older
than the lock timeout, is reported as stale with its remedy; `clear_stale_locks` removes the former.
"""

from __future__ import annotations

import bisect
import os
import re
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import NamedTuple

from reelstore.crashpoints import crash_point
from reelstore.errors import BadInput, Conflict, NotFound, StorageError
from reelstore.objects import ZERO_HEX, Hash
from reelstore.objects.hash import is_full_hex
from reelstore.storage.fileio import atomic_write, fsync_dir, pid_alive, temp_name, write_new
from reelstore.storage.inflight import Inflight


class _Any:
    def __repr__(self) -> str:
        return "ANY"


ANY = _Any()
"""As an expected old value: no check."""

MAX_REF = 1024
LOGGED = ("refs/heads/", "refs/views/", "refs/remotes/")


def durable_reflog(name: str) -> bool:
    """A trunk's reflog is fsynced with its ref: it marks the records this store committed and must
    drain. Other reflogs are audit trails gc reads as extra roots; their newest line rides on the ref's
    own durability point (after a power cut it may be missing, the ref never is)."""
    return name.startswith("refs/heads/")


def keeps_reflog(name: str) -> bool:
    """Trunks, views and remote-tracking refs keep a reflog, as git logs only its branch-like refs by
    default. A drain ref does not: its journal entries chain to each other and are their own log."""
    return name.startswith(LOGGED)
_BAD = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]")
_CRC = re.compile(r"[0-9a-f]{8}")
_LOOSE = re.compile(rb"([0-9a-f]{64}) ([0-9a-f]{8})\n")
_LOOSE_LEGACY = re.compile(rb"([0-9a-f]{64})\n")
_PACKED = re.compile(r"([0-9a-f]{64}) (refs/[^ ]+) ([0-9a-f]{8})")
_PACKED_LEGACY = re.compile(r"([0-9a-f]{64}) (refs/[^ ]+)")
PACKED_HEADER = "# reel packed-refs v2"
PACKED_HEADER_LEGACY = "# reel packed-refs v1"
REQUIRED_KIND = {"refs/heads/": "record", "refs/views/": "view", "refs/drains/": "journal", "refs/snapshots/": "view",
                 "refs/ops/": "opevent"}


def required_kind(name: str) -> str | None:
    """The object kind a ref of this namespace must point at (None: any kind, e.g. remote-tracking)."""
    for prefix, kind in REQUIRED_KIND.items():
        if name.startswith(prefix):
            return kind
    return None


def check_target(name: str, kind: str) -> None:
    """E014 unless an object of `kind` may be the target of ref `name` (DESIGN §3: a trunk holds a record,
    a view ref or a snapshot a view, a drain ref a journal entry, an operation's ref an operator event)."""
    want = required_kind(name)
    if want is not None and kind != want:
        raise BadInput(f"ref {name} must point at a {want}, not a {kind}", ref=name)


def checksum(name: str, body: str) -> str:
    """CRC-32 of a ref's name and one entry's text, as 8 lowercase hex digits. It covers the name so an
    entry moved to another ref (or a name changed in packed-refs) fails its check; CRC-32 catches every
    error burst up to 32 bits, so any single changed byte of an entry is detected."""
    crc = zlib.crc32(name.encode("utf-8") + b"\0" + body.encode("utf-8"))
    return f"{crc:08x}"


def check_ref_name(name: str) -> str:
    """Validate a full ref name (E014): under refs/, no `..`, no control characters, no `.lock`…"""
    problem = None
    if not name.startswith("refs/") or len(name) > MAX_REF:
        problem = "must start with refs/ and be at most 1024 characters"
    elif _BAD.search(name) or "@{" in name:
        problem = "contains a control character, a space or one of ~^:?*[\\ or @{"
    elif ".." in name or "//" in name or name.endswith("/") or name.endswith("."):
        problem = "contains '..' or '//' or ends with '/' or '.'"
    else:
        for part in name.split("/"):
            if part.startswith(".") or part.startswith("-") or part.endswith(".lock"):
                problem = "has a component starting with '.' or '-' or ending with '.lock'"
                break
    if problem is None:
        try:
            name.encode("utf-8")
        except UnicodeEncodeError:
            problem = "is not valid UTF-8"
    if problem:
        raise BadInput(f"invalid ref name {name!r}: {problem}")
    return name


_HOST = os.uname().nodename
"""This host's name, as `socket.gethostname()` gives it (read without the socket module: a Class A
write must not touch the network layer, and the audit hook that checks it counts that call)."""

LOCK_TIMEOUT = 600.0
"""Seconds after which a lock whose holder cannot be checked (another host) counts as stale."""


def holder_line() -> bytes:
    """What a lock file says about its holder: `pid PID host HOST time SECONDS`."""
    return f"pid {os.getpid()} host {_HOST} time {int(time.time())}\n".encode()


class LockInfo(NamedTuple):
    """A lock file and what it says about its holder (pid and host are unknown for a lock written by
    an older reel, which left it empty)."""

    path: Path
    pid: int | None
    host: str | None
    age: float
    dead: bool
    """Provably dead: the holder is a process of this host that no longer runs."""
    stale: bool
    """Dead, or older than the lock timeout."""

    def holder(self) -> str:
        if self.pid is None:
            return "an unknown holder"
        return f"pid {self.pid} on {self.host}"

    def describe(self) -> str:
        why = ("no longer running" if self.dead else
               "not checkable from here" if self.host != _HOST else "unknown")
        return f"{self.path.name} held by {self.holder()} ({why}), {self.age:.0f}s old"


def read_lock(path: Path, timeout: float = LOCK_TIMEOUT) -> LockInfo:
    """Who holds lock file `path`, how long it has been held and whether it is stale."""
    try:
        st = path.stat()
        text = path.read_text("utf-8", errors="replace")
    except OSError:
        return LockInfo(path, None, None, 0.0, False, False)
    fields = text.split()
    info = dict(zip(fields[::2], fields[1::2]))
    pid = int(info["pid"]) if info.get("pid", "").isdigit() else None
    host = info.get("host")
    since = int(info["time"]) if info.get("time", "").isdigit() else st.st_mtime
    age = max(0.0, time.time() - since)
    dead = pid is not None and host == _HOST and not pid_alive(pid)
    return LockInfo(path, pid, host, age, dead, dead or age > timeout)


Locks = list[LockInfo]
Updates = list["RefUpdate"]
"""A list of lock files (named so the annotation is not shadowed by `RefStore.list`)."""


def lock_conflict(name: str, lock: LockInfo) -> Conflict:
    """E002 for a ref whose lock is taken: the live holder, or the stale lock and its remedy."""
    if lock.stale:
        return Conflict(
            f"cannot lock ref {name}: its lock is stale ({lock.describe()}); nothing was written. "
            f"Remove it with `reel gc --clear-stale-locks`{'' if lock.dead else ' --force'} "
            f"(or delete {lock.path} once you know no reel process uses it)",
            ref=name, lock=str(lock.path), stale=True)
    return Conflict(f"cannot lock ref {name}: {lock.path} is held by {lock.holder()} for {lock.age:.0f}s; another "
                    "reel process is updating it", ref=name, lock=str(lock.path))


class NameSet:
    """Ref names, sorted, answering "which name is in the way of this one" in O(depth + log n).

    `refs/heads/a` and `refs/heads/a/b` cannot both exist: on disk one would be a file and a directory.
    """

    def __init__(self, names: Iterable[str] = ()) -> None:
        self._set = set(names)
        self._sorted = sorted(self._set)

    def add(self, name: str) -> None:
        if name not in self._set:
            self._set.add(name)
            bisect.insort(self._sorted, name)

    def conflict(self, name: str) -> str | None:
        """A name that is a directory of `name`, or lives under it; None if there is none."""
        parts = name.split("/")
        for i in range(2, len(parts)):
            ancestor = "/".join(parts[:i])
            if ancestor in self._set:
                return ancestor
        under = name + "/"
        at = bisect.bisect_left(self._sorted, under)
        if at < len(self._sorted) and self._sorted[at].startswith(under):
            return self._sorted[at]
        return None


def _valid(name: str) -> bool:
    """A file under refs/ that cannot be a ref (a lock, a temporary or stray file) is not listed."""
    try:
        check_ref_name(name)
    except BadInput:
        return False
    return True


class ReflogEntry(NamedTuple):
    old: Hash | None
    new: Hash | None
    time_ms: int
    principal: str
    message: str
    verified: bool = True
    """False for a legacy line (written before reflog lines carried a checksum)."""

    def body(self) -> str:
        old = self.old.hex() if self.old else ZERO_HEX
        new = self.new.hex() if self.new else ZERO_HEX
        msg = self.message.replace("\n", " ")
        who = " ".join(self.principal.split())
        return f"{old} {new} {self.time_ms} {who}\t{msg}"

    def line(self, name: str) -> str:
        """`CRC OLD NEW TIME WHO<tab>MESSAGE`, the CRC over the ref's name and the rest of the line."""
        body = self.body()
        return f"{checksum(name, body)} {body}\n"

    @classmethod
    def parse(cls, line: str, name: str) -> ReflogEntry:
        """One line of `name`'s reflog (without its newline). E014 if malformed or its checksum fails."""
        crc, verified = line[:8], True
        if len(line) > 9 and line[8] == " " and _CRC.fullmatch(crc):
            body = line[9:]
            if checksum(name, body) != crc:
                raise BadInput(f"reflog line fails its checksum: {line[:100]!r}")
        elif len(line) > 64 and line[64] == " " and is_full_hex(line[:64]):
            body, verified = line, False
        else:
            raise BadInput(f"malformed reflog line {line[:100]!r}")
        head, _, message = body.partition("\t")
        parts = head.split(" ", 3)
        if len(parts) < 3 or not is_full_hex(parts[0]) or not is_full_hex(parts[1]) or not parts[2].isdigit() or (
                not parts[2].isascii()):
            raise BadInput(f"malformed reflog line {line[:100]!r}")
        old = None if parts[0] == ZERO_HEX else Hash.from_hex(parts[0])
        new = None if parts[1] == ZERO_HEX else Hash.from_hex(parts[1])
        return cls(old, new, int(parts[2]), parts[3] if len(parts) > 3 else "", message, verified)


class RefUpdate(NamedTuple):
    name: str
    new: Hash | None
    """None deletes the ref."""
    old: Hash | None | _Any
    """None: the ref must not exist. ANY: no check. Verify-only updates have new == old."""
    verify_only: bool = False
    create_reflog: bool = False
    """Log this update even where `keeps_reflog` would not (git's --create-reflog)."""


class RefTransaction:
    """All-or-nothing: `update`/`create`/`delete`/`verify`, then `commit()` (or `abort()`).

    `prepare()` locks every ref and checks every expected value; `commit()` prepares if needed and
    writes. A failed check raises E002 and releases every lock, having written nothing.
    """

    def __init__(self, store: RefStore, message: str = "", principal: str = "", create_reflog: bool = False,
                 *, durable: bool = True) -> None:
        self.store = store
        self.message = message
        self.principal = principal
        self.create_reflog = create_reflog
        self.durable = durable
        """False: write without fsync, for a ref that only caches what a durable log already holds
        (a drain ref: its journal segment is the durable record)."""
        self.updates: dict[str, RefUpdate] = {}
        self.state = "open"
        self._held: set[str] = set()

    def _add(self, upd: RefUpdate) -> RefTransaction:
        if self.state != "open":
            raise BadInput(f"transaction is {self.state}; no more updates")
        check_ref_name(upd.name)
        if upd.name in self.updates:
            raise BadInput(f"ref {upd.name} appears twice in one transaction")
        self.updates[upd.name] = upd._replace(create_reflog=True) if self.create_reflog else upd
        return self

    def update(self, name: str, new: Hash, old: Hash | None | _Any = ANY) -> RefTransaction:
        return self._add(RefUpdate(name, new, old))

    def create(self, name: str, new: Hash) -> RefTransaction:
        return self._add(RefUpdate(name, new, None))

    def delete(self, name: str, old: Hash | _Any = ANY) -> RefTransaction:
        return self._add(RefUpdate(name, None, old))

    def verify(self, name: str, old: Hash | None) -> RefTransaction:
        return self._add(RefUpdate(name, old, old, verify_only=True))

    def prepare(self) -> None:
        if self.state == "prepared":
            return
        if self.state != "open":
            raise BadInput(f"transaction is {self.state}")
        names = sorted(self.updates)
        self.store._lock(names)
        self._held = set(names)
        try:
            for name in names:
                upd = self.updates[name]
                current = self.store._read(name)
                if upd.old is not ANY and current != upd.old:
                    want = upd.old.hex() if isinstance(upd.old, Hash) else "absent"
                    have = "absent" if current is None else current.hex()
                    raise Conflict(f"cannot update ref {name}: it is {have} but expected {want}", ref=name)
                if upd.new is None and not upd.verify_only and current is None:
                    raise NotFound(f"cannot delete ref {name}: it does not exist", ref=name)
        except BaseException:
            self._release()
            self.state = "aborted"
            raise
        self.state = "prepared"

    def _release(self) -> None:
        self.store._unlock(sorted(self._held))
        self._held.clear()

    def commit(self) -> None:
        self.prepare()
        try:
            if self.store.before_apply is not None:
                # Every ref is locked and checked: now make durable what the new values may name.
                self.store.before_apply()
            crash_point("refs:prepared")
            writes = [u for n in sorted(self.updates) if not (u := self.updates[n]).verify_only]
            self.store._apply_as(writes, self.message, self.principal, self._held, self.durable)
            self.store._settle()
        finally:
            self._release()
            self.state = "committed"

    def abort(self) -> None:
        if self.state == "prepared":
            self._release()
        self.state = "aborted"

    def __enter__(self) -> RefTransaction:
        return self

    def __exit__(self, exc_type: object, *_: object) -> None:
        if exc_type is None and self.state in ("open", "prepared"):
            self.commit()
        elif self.state != "committed":
            self.abort()


def format_loose(name: str, value: Hash) -> bytes:
    """A loose ref file: `ID CRC` and a newline."""
    return f"{value.hex()} {checksum(name, value.hex())}\n".encode("ascii")


def parse_loose(name: str, data: bytes) -> Hash:
    """The id a loose ref file holds; E007 naming the ref if the file is damaged. A legacy file (exactly
    `ID` and a newline, as written before refs carried checksums) is accepted: one changed byte cannot
    turn a checksummed file into one, since the two differ in length."""
    m = _LOOSE.fullmatch(data)
    if m is not None:
        text = m.group(1).decode("ascii")
        if checksum(name, text) != m.group(2).decode("ascii"):
            raise StorageError(f"ref {name} is damaged: its checksum does not match", ref=name)
        return Hash.from_hex(text)
    m = _LOOSE_LEGACY.fullmatch(data)
    if m is not None:
        return Hash.from_hex(m.group(1).decode("ascii"))
    raise StorageError(f"ref {name} is damaged: {data[:80]!r} is not an object id and checksum", ref=name)


def format_packed(packed: Mapping[str, Hash]) -> bytes:
    """packed-refs v2: the header, then `ID NAME CRC` lines sorted by name."""
    lines = [PACKED_HEADER] + [f"{h.hex()} {n} {checksum(n, h.hex())}" for n, h in sorted(packed.items())]
    return ("\n".join(lines) + "\n").encode("utf-8")


def parse_packed(data: bytes) -> dict[str, Hash]:
    """packed-refs, strictly: the first line is a known header, every other line one entry (no comments,
    no blank lines), each v2 entry's checksum holds. Anything else is E007 naming the line."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise StorageError(f"packed-refs is damaged: not UTF-8 at byte {exc.start}") from None
    if not text:
        return {}
    if not text.endswith("\n"):
        raise StorageError("packed-refs is damaged: it does not end with a newline")
    lines = text[:-1].split("\n")
    if lines[0] not in (PACKED_HEADER, PACKED_HEADER_LEGACY):
        raise StorageError(f"packed-refs is damaged: unknown header {lines[0][:80]!r}")
    legacy = lines[0] == PACKED_HEADER_LEGACY
    out: dict[str, Hash] = {}
    for no, line in enumerate(lines[1:], start=2):
        m = (_PACKED_LEGACY if legacy else _PACKED).fullmatch(line)
        name = m.group(2) if m is not None else ""
        if m is None or not _valid(name) or name in out:
            raise StorageError(f"packed-refs is damaged at line {no}: {line[:80]!r}")
        if not legacy and checksum(name, m.group(1)) != m.group(3):
            raise StorageError(f"packed-refs is damaged at line {no}: the checksum of {name} does not match", ref=name)
        out[name] = Hash.from_hex(m.group(1))
    return out


def parse_reflog(name: str, data: bytes) -> list[ReflogEntry]:
    """Every line of `name`'s reflog; E007 naming the ref and line on the first damaged one."""
    if data and not data.endswith(b"\n"):
        raise StorageError(f"reflog of {name} is damaged: its last line is torn", ref=name)
    out = []
    for no, raw in enumerate(data.split(b"\n")[:-1], start=1):
        try:
            out.append(ReflogEntry.parse(raw.decode("utf-8"), name))
        except UnicodeDecodeError:
            raise StorageError(f"reflog of {name} is damaged at line {no}: not UTF-8", ref=name) from None
        except BadInput as exc:
            raise StorageError(f"reflog of {name} is damaged at line {no}: {exc.message}", ref=name) from None
    return out


class RefStore:
    """The interface: read, list, compare-and-swap, transactions, reflogs."""

    before_apply: Callable[[], None] | None = None
    """Called once every ref of a transaction is locked and checked, before anything is written: the
    store points it at its object store's `flush`, so a ref never names an object not yet durable and
    a lost race (caught while locking) makes nothing durable."""

    def _read(self, name: str) -> Hash | None:
        raise NotImplementedError

    def _lock(self, names: list[str]) -> None:
        raise NotImplementedError

    def _unlock(self, names: list[str]) -> None:
        raise NotImplementedError

    def _apply(self, updates: list[RefUpdate], message: str, principal: str, held: set[str]) -> None:
        """Write under the locks in `held` (released by the caller afterwards)."""
        raise NotImplementedError

    def names(self) -> Iterator[str]:
        raise NotImplementedError

    def loose_names(self) -> Iterator[str]:
        """The names readable one by one, without the shared packed list (what fsck can still list when
        that list is damaged); a store that keeps no such list lists every name."""
        return self.names()

    def _settle(self) -> None:
        """A transaction landed: the objects this thread wrote before it are referenced now, or garbage,
        and need no more protection from a concurrent gc (see storage/inflight.py). A failed one settles
        nothing, since its writer may retry it with the objects it already wrote."""

    def reflog(self, name: str) -> list[ReflogEntry]:
        raise NotImplementedError

    def stale_locks(self) -> Locks:
        """Lock files whose holder is dead or that are older than the lock timeout."""
        return []

    def clear_stale_locks(self, force: bool = False) -> Locks:
        """Remove the stale locks whose holder is provably dead; returns them."""
        return []

    def get(self, name: str) -> Hash | None:
        return self._read(check_ref_name(name))

    def __getitem__(self, name: str) -> Hash:
        value = self.get(name)
        if value is None:
            raise NotFound(f"no ref {name}", ref=name)
        return value

    def list(self, prefix: str = "refs/") -> list[tuple[str, Hash]]:
        """Every ref whose name starts with `prefix`, sorted by name."""
        out = []
        for name in sorted(set(self.names())):
            if name.startswith(prefix):
                value = self._read(name)
                if value is not None:
                    out.append((name, value))
        return out

    def _apply_as(self, updates: Updates, message: str, principal: str, held: set[str],
                  durable: bool) -> None:
        """`_apply`, durably or not; a store without fsyncs has nothing to relax."""
        self._apply(updates, message, principal, held)

    def transaction(self, message: str = "", principal: str = "", create_reflog: bool = False, *,
                    durable: bool = True) -> RefTransaction:
        """A transaction; with `create_reflog` every ref it writes gets a reflog, whatever its namespace;
        `durable=False` writes without fsync (see `RefTransaction.durable`)."""
        return RefTransaction(self, message, principal, create_reflog, durable=durable)

    def set(
        self, name: str, new: Hash, old: Hash | None | _Any = ANY, message: str = "", principal: str = ""
    ) -> None:
        """Compare-and-swap one ref (old=None: must not exist). E002 if it holds something else."""
        self.transaction(message, principal).update(name, new, old).commit()

    def delete(self, name: str, old: Hash | _Any = ANY, message: str = "", principal: str = "") -> None:
        self.transaction(message, principal).delete(name, old).commit()


class MemoryRefStore(RefStore):
    """For tests and embedding. One mutex stands in for the lock files."""

    def __init__(self) -> None:
        self._refs: dict[str, Hash] = {}
        self._logs: dict[str, list[ReflogEntry]] = {}
        self._locked: set[str] = set()
        self._mutex = threading.Lock()

    def _read(self, name: str) -> Hash | None:
        return self._refs.get(name)

    def _lock(self, names: list[str]) -> None:
        with self._mutex:
            busy = [n for n in names if n in self._locked]
            if busy:
                raise Conflict(f"cannot lock ref {busy[0]}: another update holds it", ref=busy[0])
            taken = NameSet([*self._refs, *self._locked])
            for name in names:
                other = taken.conflict(name)
                if other is not None:
                    raise Conflict(f"cannot lock ref {name}: ref {other} is in the way", ref=name)
                taken.add(name)
            self._locked.update(names)

    def _unlock(self, names: list[str]) -> None:
        with self._mutex:
            self._locked.difference_update(names)

    def _apply(self, updates: list[RefUpdate], message: str, principal: str, held: set[str]) -> None:
        now = int(time.time() * 1000)
        for u in updates:
            old = self._refs.get(u.name)
            if u.new is None:
                self._refs.pop(u.name, None)
                self._logs.pop(u.name, None)
            else:
                if keeps_reflog(u.name) or u.create_reflog or u.name in self._logs:
                    self._logs.setdefault(u.name, []).append(ReflogEntry(old, u.new, now, principal, message))
                self._refs[u.name] = u.new

    def names(self) -> Iterator[str]:
        return iter(list(self._refs))

    def reflog(self, name: str) -> list[ReflogEntry]:
        return list(self._logs.get(check_ref_name(name), ()))


class DiskRefStore(RefStore):
    """Loose refs under `refs/`, `packed-refs`, reflogs under `logs/`, all inside the `.reel` dir."""

    def __init__(self, root: Path, *, fsync: bool = True, lock_timeout: float = LOCK_TIMEOUT) -> None:
        self.root = Path(root)
        self.fsync = fsync
        self.lock_timeout = lock_timeout
        self.packed_path = self.root / "packed-refs"
        self.inflight: Inflight | None = None
        """The gc fence's registry of this thread's unreferenced writes; set by Repo.open."""
        self._packed_cache: tuple[tuple[int, int, int], dict[str, Hash]] | None = None

    def _path(self, name: str) -> Path:
        return self.root / name

    def _settle(self) -> None:
        if self.inflight is not None:
            self.inflight.settle()

    def _log_path(self, name: str) -> Path:
        return self.root / "logs" / name

    def _read(self, name: str) -> Hash | None:
        path = self._path(name)
        try:
            data = path.read_bytes()
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return self._packed_view().get(name)
        except OSError as exc:
            raise StorageError(f"cannot read ref {name}: {exc}", ref=name) from None
        return parse_loose(name, data)

    def _packed(self) -> dict[str, Hash]:
        """packed-refs as a fresh dict the caller may change."""
        return dict(self._packed_view())

    def _packed_view(self) -> Mapping[str, Hash]:
        """packed-refs, read-only; parsed again only when the file was replaced since the last read."""
        try:
            st = os.stat(self.packed_path)
        except FileNotFoundError:
            return {}
        key = (st.st_ino, st.st_mtime_ns, st.st_size)
        if self._packed_cache is None or self._packed_cache[0] != key:
            try:
                data = self.packed_path.read_bytes()
            except FileNotFoundError:
                return {}
            except OSError as exc:
                raise StorageError(f"cannot read packed-refs: {exc}") from None
            self._packed_cache = (key, parse_packed(data))
        return self._packed_cache[1]

    def _write_packed(self, packed: dict[str, Hash]) -> None:
        atomic_write(self.packed_path, format_packed(packed), fsync=self.fsync)

    def _lock(self, names: list[str]) -> None:
        taken: list[str] = []
        packed = NameSet(self._packed_view())
        try:
            for name in names:
                self._clear_way(name, packed)
                lock = self._path(name + ".lock")
                try:
                    self._create_lock(lock)
                except (NotADirectoryError, IsADirectoryError):
                    raise Conflict(f"cannot lock ref {name}: a ref is in the way of its path", ref=name) from None
                except FileExistsError:
                    raise lock_conflict(name, read_lock(lock, self.lock_timeout)) from None
                taken.append(name)
        except BaseException:
            self._unlock(taken)
            raise

    def _create_lock(self, lock: Path, attempts: int = 3) -> None:
        """Create `lock` exclusively, making its directory; retried if a concurrent prune removed it."""
        for attempt in range(attempts):
            try:
                lock.parent.mkdir(parents=True, exist_ok=True)
            except FileExistsError:
                raise NotADirectoryError(lock.parent) from None
            try:
                write_new(lock, holder_line(), fsync=False)
                return
            except FileNotFoundError:
                if attempt == attempts - 1:
                    raise

    def _clear_way(self, name: str, packed: NameSet) -> None:
        """Refuse (E002) a name that is a directory of another ref, or under one, packed or loose or being
        written; remove empty directories left where the ref file must go."""
        parts = name.split("/")
        ancestors = ["/".join(parts[:i]) for i in range(2, len(parts))]
        loose = [a for a in ancestors if self._path(a).is_file() or self._path(a + ".lock").exists()]
        path = self._path(name)
        if path.is_dir():
            for dirpath, _, files in os.walk(path):
                loose += [os.path.join(dirpath, f) for f in files if not f.startswith(".tmp-")]
        other = loose[0] if loose else packed.conflict(name)
        if other is not None:
            raise Conflict(f"cannot lock ref {name}: {other} is in the way", ref=name)
        if path.is_dir():
            for dirpath, _, _ in sorted(os.walk(path), key=lambda t: -len(t[0])):
                with suppress(OSError):
                    os.rmdir(dirpath)

    def _unlock(self, names: list[str]) -> None:
        for name in names:
            lock = self._path(name + ".lock")
            lock.unlink(missing_ok=True)
            if not self._path(name).exists():
                self._prune_dirs(lock.parent)

    def _apply_as(self, updates: list[RefUpdate], message: str, principal: str, held: set[str],
                  durable: bool) -> None:
        self._apply(updates, message, principal, held, durable=durable)

    def _apply(self, updates: list[RefUpdate], message: str, principal: str, held: set[str],
               durable: bool = True) -> None:
        now = int(time.time() * 1000)
        sync = self.fsync and durable
        deletes = [u for u in updates if u.new is None]
        for u in updates:
            if u.new is None:
                continue
            # The new value goes into a temporary file renamed over the ref while the lock is held, so
            # the lock keeps naming its holder to the end (a killed writer's lock is provably stale).
            path = self._path(u.name)
            old = self._read(u.name)
            tmp = temp_name(path)
            write_new(tmp, format_loose(u.name, u.new), fsync=sync)
            crash_point("refs:lock-written")
            if keeps_reflog(u.name) or u.create_reflog or self._log_path(u.name).exists():
                self._append_log(u.name, ReflogEntry(old, u.new, now, principal, message))
            crash_point("refs:logged")
            try:
                os.replace(tmp, path)
            except BaseException:
                tmp.unlink(missing_ok=True)
                raise
            crash_point("refs:renamed")
            if sync:
                fsync_dir(path.parent)
        if deletes:
            if any(u.name in self._packed_view() for u in deletes):
                with self._packed_locked():
                    packed = self._packed()
                    for u in deletes:
                        packed.pop(u.name, None)
                    self._write_packed(packed)
                    crash_point("refs:packed-rewritten")
            for u in deletes:
                self._path(u.name).unlink(missing_ok=True)
                self._log_path(u.name).unlink(missing_ok=True)
                self._prune_dirs(self._path(u.name).parent)
                self._prune_dirs(self._log_path(u.name).parent)

    def _prune_dirs(self, d: Path) -> None:
        """Remove empty directories up from `d`, keeping the namespaces themselves (refs/heads, …)."""
        tops = (self.root / "refs", self.root / "logs" / "refs")
        while any(top in d.parents and d.parent != top for top in tops):
            try:
                d.rmdir()
            except OSError:
                return
            d = d.parent

    def stale_locks(self) -> Locks:
        """Every stale lock file of this store (refs and packed-refs), by path."""
        out = []
        paths = [self.root / "packed-refs.lock"]
        for dirpath, _, files in os.walk(self.root / "refs"):
            paths += [Path(dirpath) / f for f in files if f.endswith(".lock")]
        for path in sorted(paths):
            if path.exists():
                info = read_lock(path, self.lock_timeout)
                if info.stale:
                    out.append(info)
        return out

    def clear_stale_locks(self, force: bool = False) -> Locks:
        """Remove the locks whose holder is provably dead (with `force`, every stale one) and the
        temporary ref files dead writers left; returns the locks removed."""
        removed = []
        for info in self.stale_locks():
            if info.dead or force:
                again = read_lock(info.path, self.lock_timeout)
                if again.pid == info.pid and (again.dead or (force and again.stale)):
                    info.path.unlink(missing_ok=True)
                    removed.append(info)
        for dirpath, _, files in os.walk(self.root / "refs"):
            for f in files:
                parts = f.split("-")
                if f.startswith(".tmp-") and len(parts) >= 3 and parts[-2].isdigit():
                    if not pid_alive(int(parts[-2])):
                        (Path(dirpath) / f).unlink(missing_ok=True)
        return removed

    def _append_log(self, name: str, entry: ReflogEntry) -> None:
        path = self._log_path(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, entry.line(name).encode("utf-8"))
            if self.fsync and durable_reflog(name):
                os.fsync(fd)
        finally:
            os.close(fd)

    def names(self) -> Iterator[str]:
        return iter(sorted(set(self._packed_view()) | set(self.loose_names())))

    def loose_names(self) -> Iterator[str]:
        """The loose refs alone (what fsck can still list when packed-refs is damaged)."""
        for dirpath, _, files in os.walk(self.root / "refs"):
            for f in files:
                name = os.path.relpath(os.path.join(dirpath, f), self.root).replace(os.sep, "/")
                if _valid(name):
                    yield name

    def reflog(self, name: str) -> list[ReflogEntry]:
        try:
            data = self._log_path(check_ref_name(name)).read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            return []
        except OSError as exc:
            raise StorageError(f"cannot read the reflog of {name}: {exc}", ref=name) from None
        return parse_reflog(name, data)

    def pack_refs(self) -> int:
        """Move every loose ref into packed-refs (under every ref's lock); returns how many moved."""
        names = [n for n in self.names() if self._path(n).is_file()]
        if not names:
            return 0
        self._lock(names)
        try:
            with self._packed_locked():
                packed = self._packed()
                for n in names:
                    value = self._read(n)
                    if value is not None:
                        packed[n] = value
                self._write_packed(packed)
                crash_point("refs:packed-rewritten")
                for n in names:
                    self._path(n).unlink(missing_ok=True)
                    self._prune_dirs(self._path(n).parent)
        finally:
            self._unlock(names)
        return len(names)

    @contextmanager
    def _packed_locked(self, wait_s: float = 10.0) -> Iterator[None]:
        """packed-refs is rewritten whole; its lock is held for milliseconds, so wait for it briefly."""
        lock = self.root / "packed-refs.lock"
        deadline = time.monotonic() + wait_s
        while True:
            try:
                write_new(lock, holder_line(), fsync=False)
                break
            except FileExistsError:
                if time.monotonic() > deadline:
                    raise Conflict(f"cannot lock packed-refs: {lock} exists; if no reel runs, remove it") from None
                time.sleep(0.005)
        try:
            yield
        finally:
            lock.unlink(missing_ok=True)
