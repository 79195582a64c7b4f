"""A store on disk (or in memory): its objects, its refs and its config, found like git's.

This is the low-level handle the kernel, gc and sync work through. Discovery follows git: an
explicit directory, then `REEL_DIR`, then walking up from the working directory for `.reel`.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

from reelstore.attribution import principal
from reelstore.backend.config import Config
from reelstore.backend.inflight import Inflight
from reelstore.backend.refdb.refs import DiskRefStore, MemoryRefStore, RefStore
from reelstore.errors import BadInput, Conflict, NotFound
from reelstore.objects import Hash
from reelstore.objects.hash import is_full_hex, is_prefix
from reelstore.objects.ref import check_ref_name

if TYPE_CHECKING:
    from reelstore.backend.object_cache import ObjectCache
    from reelstore.backend.object_store import ObjectStore
    from reelstore.backend.op_log import OpLog, RefMove
    from reelstore.backend.state_files import StateFiles
    from reelstore.backend.verb_log import VerbLog

REEL_DIR = ".reel"
DEFAULT_TRUNK = "main"
FORMAT_VERSION = "1"
_SEARCH = ("refs/{}", "refs/heads/{}", "refs/views/{}", "refs/remotes/{}", "refs/drains/{}", "refs/tags/{}")
S = TypeVar("S")


class Repo:
    """One open store: its objects, refs, config and state files, and every piece of per-store state
    the layers above keep while it is open (the object cache, the verb log, and through `attached` the
    namespace map or a journal index). Memory and disk differ only in the stores passed in.

    `path` is the `.reel` directory itself (None for an in-memory store).
    """

    def __init__(
        self,
        files: StateFiles | Callable[[], StateFiles],
        objects: ObjectStore | Callable[[], ObjectStore],
        refs: RefStore,
        config: Config,
        root: Path | None = None,
    ) -> None:
        """`objects` may be the function that opens the object store: it then opens on first use, so a
        command that reads only refs (show-ref) never loads the pack machinery. So may `files`, with
        `root` the directory they will have: a command that keeps no state file (show-ref, cat-file,
        update-ref) never loads them."""
        self._files: StateFiles | None = None
        self._open_files: Callable[[], StateFiles] | None = None
        if callable(files):
            self._open_files = files
            self.path = root
        else:
            self._files = files
            self.path = files.root
        self._objects: ObjectStore | None = None
        self._cache: ObjectCache | None = None
        self._open_objects: Callable[[], ObjectStore] | None = None
        if callable(objects):
            self._open_objects = objects
        else:
            self._objects = objects
        self.refs = refs
        self.config = config
        refs.before_apply = self._flush_objects
        refs.log_moves = self._log_moves
        self._ops: OpLog | None = None
        self._verbs: VerbLog | None = None
        self._attached: dict[Callable[[Repo], Any], Any] = {}
        self._attach_guard = threading.RLock()

    def _opened(self, slot: str, open_: Callable[[], S] | None) -> S:
        """The value kept in attribute `slot`, built by `open_` on first use: once per store, however
        many threads ask at once (a second object store would hold a second batch)."""
        with self._attach_guard:
            value = getattr(self, slot)
            if value is None:
                assert open_ is not None  # a slot given no value at construction was given its opener
                value = open_()
                setattr(self, slot, value)
            return cast(S, value)

    @property
    def files(self) -> StateFiles:
        """The store's state files (the verb log, bindings, claims, locks, hooks), opened on first use."""
        files = self._files
        return files if files is not None else self._opened("_files", self._open_files)

    @property
    def verbs(self) -> VerbLog:
        """The verb log (fork, commit, abort), opened on first use: a plumbing verb never reads it."""
        log = self._verbs
        return log if log is not None else self._opened("_verbs", self._open_verbs)

    def _open_verbs(self) -> VerbLog:
        from reelstore.backend.verb_log import VerbLog

        return VerbLog(self.ops)

    @property
    def ops(self) -> OpLog:
        """The operation log: every ref move and every view's fork, commit and abort."""
        log = self._ops
        return log if log is not None else self._opened("_ops", self._open_ops)

    def _open_ops(self) -> OpLog:
        from reelstore.backend.op_log import OpLog

        return OpLog(self.files)

    def _log_moves(self, message: str, principal: str, moves: list[RefMove], durable: bool) -> bool:
        return self.ops.record(message, principal or self.principal(), moves, durable=durable)

    @property
    def objects(self) -> ObjectStore:
        store = self._objects
        return store if store is not None else self._opened("_objects", self._open_objects)

    @property
    def cache(self) -> ObjectCache:
        """Decoded objects recently read or written through this store (backend/object_cache)."""
        cache = self._cache
        return cache if cache is not None else self._opened("_cache", self._open_cache)

    def _open_cache(self) -> ObjectCache:
        from reelstore.backend.object_cache import ObjectCache

        return ObjectCache(self.objects)

    def principal(self) -> str:
        """Who acts in this store, as its reflogs, records, views and operator actions name them:
        REEL_PRINCIPAL, else config `user.name`, else the login name (`stamp.principal`). Looked up
        once per handle and change of the config, not per object that names it."""
        if os.environ.get("REEL_PRINCIPAL"):
            return principal()
        return self.config.derived(_configured_principal)

    def _flush_objects(self) -> None:
        """Before a ref moves: make the objects written so far durable (nothing to do if none were)."""
        if self._objects is not None:
            self._objects.flush()

    def attached(self, make: Callable[[Repo], S]) -> S:
        """The per-store state `make` builds, built once per open store: a higher layer keeps its state
        here (`make` is the key), so it lives exactly as long as this store and never in a module global."""
        try:
            return cast(S, self._attached[make])  # built by `make`, so of its type
        except KeyError:
            pass
        with self._attach_guard:
            if make not in self._attached:
                self._attached[make] = make(self)
            return cast(S, self._attached[make])

    def attach(self, make: Callable[[Repo], S], state: S) -> None:
        """Set the state `attached(make)` returns (for state built elsewhere, such as a simulated world)."""
        with self._attach_guard:
            self._attached[make] = state

    @classmethod
    def memory(cls, trunk: str = DEFAULT_TRUNK) -> Repo:
        """An in-memory store with its trunk started, for tests and embedding."""
        from reelstore.backend.object_store import MemoryObjectStore
        from reelstore.backend.state_files import MemoryFiles

        repo = cls(MemoryFiles(), MemoryObjectStore(), MemoryRefStore(), Config(None, _initial_config(trunk)))
        repo.start_trunk(trunk)
        return repo

    @classmethod
    def init(
        cls,
        directory: Path | str = ".",
        trunk: str = DEFAULT_TRUNK,
        backend: str | None = None,
        *,
        field: str = "--backend",
    ) -> Repo:
        """Create `DIRECTORY/.reel` with config and sample hooks; E014 if a store is already there.

        With `backend` (a postgresql:// URL), objects, refs and the operation log live in that database
        (checked before anything is created here): a database that already holds the trunk is joined,
        so every machine's directory shares it. A bad URL is an error naming `field`."""
        check_ref_name(f"refs/heads/{trunk}")
        path = Path(directory).resolve() / REEL_DIR
        if (path / "config").exists():
            raise BadInput(f"a reel store already exists at {path}")
        if backend is not None:
            return cls._init_shared(path, trunk, backend, field)
        for sub in ("objects", "objects/pack", "refs/heads", "refs/views", "refs/drains", "logs", "hooks"):
            (path / sub).mkdir(parents=True, exist_ok=True)
        _make_shards(path / "objects")
        from reelstore.hooks import install_samples

        install_samples(path / "hooks")
        config = Config(path / "config", _initial_config(trunk))
        config.save()
        repo = cls.open(path)
        repo.start_trunk(trunk)
        return repo

    @classmethod
    def _init_shared(cls, path: Path, trunk: str, backend: str, field: str) -> Repo:
        from reelstore.backend.postgres import PgDb

        probe = PgDb(backend, field=field)
        try:
            probe.run(lambda conn: None)  # reachable, and the schema is there (made if it was not)
        finally:
            probe.close()
        for sub in ("logs", "hooks"):
            (path / sub).mkdir(parents=True, exist_ok=True)
        from reelstore.hooks import install_samples

        install_samples(path / "hooks")
        config = Config(path / "config", _initial_config(trunk))
        config.set("core.backend", backend)
        config.save()
        repo = cls.open(path)
        if repo.refs.get(f"refs/heads/{trunk}") is None:
            try:
                repo.start_trunk(trunk)
            except Conflict:  # another machine started it first: join it
                pass
        return repo

    def start_trunk(self, trunk: str, author: str = "reel init") -> Hash:
        """Point `refs/heads/TRUNK` at a root record with an empty namespace (E002 if it exists)."""
        from reelstore.objects import Record, Tree

        empty = Tree(0, ())
        root = Record(None, empty.id, author=author, message=f"start trunk {trunk}", time=int(time.time() * 1000))
        self.objects.put_many([empty, root])
        self.refs.set(f"refs/heads/{trunk}", root.id, None, message="init", principal=author)
        return root.id

    @classmethod
    def open(cls, path: Path | str) -> Repo:
        """Open a store given its `.reel` directory or the directory that holds it."""
        path = Path(path)
        if (path / REEL_DIR / "config").is_file():
            path = path / REEL_DIR
        if not (path / "config").is_file():
            raise NotFound(f"not a reel store: {path}")
        config = Config(path / "config")
        if config.get("core.format", FORMAT_VERSION) != FORMAT_VERSION:
            raise BadInput(f"store format {config.get('core.format')} is not supported (want {FORMAT_VERSION})")
        backend = config.get("core.backend")
        if backend:
            return cls._open_shared(path, config, backend)
        if not (path / "objects").is_dir():
            raise NotFound(f"not a reel store: {path}")
        fsync = config.get_bool("core.fsync", True)
        refs = DiskRefStore(path, fsync=fsync)
        refs.recover()  # the ref moves the operation log holds that a crash kept from their files
        inflight = refs.inflight = Inflight(path)

        def open_objects() -> ObjectStore:
            from reelstore.backend.disk_store import DiskObjectStore

            objects = DiskObjectStore(path / "objects", fsync=fsync)
            objects.inflight = inflight
            objects.setting = config.get
            return objects

        root = path.resolve()

        def open_files() -> StateFiles:
            from reelstore.backend.state_files import DiskFiles

            return DiskFiles(root, fsync=fsync)

        return cls(open_files, open_objects, refs, config, root)

    @classmethod
    def _open_shared(cls, path: Path, config: Config, backend: str) -> Repo:
        """A store whose objects, refs and operation log are in the database `backend` names."""
        from reelstore.backend.postgres import PgDb, PgFiles, PgObjectStore
        from reelstore.backend.postgres_refs import PgRefStore

        db = PgDb(backend)
        repo = cls(PgFiles(path.resolve(), db), PgObjectStore(db), PgRefStore(db), config)
        # Opened now, not on first use: a ref transaction logs through it while it holds the connection,
        # and opening it then would wait for the handle's guard, which another thread may hold while it
        # waits for the connection.
        repo.ops  # noqa: B018
        return repo

    @classmethod
    def discover(cls, start: Path | str | None = None) -> Repo:
        """REEL_DIR if set (and no `start`), else the nearest `.reel` at or above `start` (or the cwd)."""
        env = os.environ.get("REEL_DIR")
        if env and start is None:
            return cls.open(env)
        here = Path(start or Path.cwd()).resolve()
        if here.name == REEL_DIR and (here / "config").is_file():
            return cls.open(here)
        for d in (here, *here.parents):
            if (d / REEL_DIR / "config").is_file():
                return cls.open(d / REEL_DIR)
        raise NotFound(f"not inside a reel store (no {REEL_DIR} here or above {here}); run `reel init`")

    @property
    def trunk(self) -> str:
        """The default trunk's name."""
        return self.config.get("core.trunk", DEFAULT_TRUNK) or DEFAULT_TRUNK

    def ref_name(self, name: str) -> str | None:
        """The full name of the ref `name` refers to, searched as git does, or None."""
        if name.startswith("refs/"):
            return name if self.refs.get(check_ref_name(name)) is not None else None
        for pattern in _SEARCH:
            full = pattern.format(name)
            try:
                if self.refs.get(check_ref_name(full)) is not None:
                    return full
            except BadInput:
                return None
        return None

    def resolve(self, name: str) -> Hash:
        """An object named by full id, ref name or unique prefix (E001 if nothing matches)."""
        if is_full_hex(name):
            return self.objects.resolve(name)
        full = self.ref_name(name)
        if full is not None:
            return self.refs[full]
        if is_prefix(name):
            return self.objects.resolve(name)
        raise NotFound(f"{name!r} names no ref and no object")


def _configured_principal(config: Config) -> str:
    return principal(config.get("user.name"))


def _initial_config(trunk: str) -> str:
    return (
        "[core]\n"
        f"\tformat = {FORMAT_VERSION}\n"
        f"\ttrunk = {trunk}\n"
        "\tfsync = true\n"
        f'[trunk "{trunk}"]\n'
        "\tcap = read,write,delete,fire_b,fire_c,secret=\n"
    )


def _make_shards(objects: Path) -> None:
    """The 256 loose-object directories `objects/00` to `objects/ff`, made durable once: a write of one
    object then goes loose at the cost of a pack (the file and its directory, see backend/write_batch),
    never a third fsync for a new directory."""
    from reelstore.backend.fileio import fsync_dir

    for i in range(256):
        (objects / f"{i:02x}").mkdir(exist_ok=True)
    fsync_dir(objects)
