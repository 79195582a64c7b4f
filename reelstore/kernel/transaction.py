"""A transaction on a view: any number of puts, removes and effect admissions, landed as one view
object and one compare-and-swap of the view's ref (jj's Transaction: many changes, one View object,
one op-head update).

Each call is checked at once (capabilities, names, admission), so a refused write fails where it was
made; blobs go straight into the store's open batch (bounded memory, nothing visible yet). `commit`
applies the gathered changes to the newest view object in one namespace batch update, writes the
view, makes the batch durable (one pack, one fsync), then moves the ref. A crash or an error before
that CAS leaves the view exactly as it was; if another writer moved the view meanwhile, the changes
are applied again on top of its newer object (re-checked) and the CAS retried.
"""

from __future__ import annotations

import io
import os
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any, BinaryIO

from reelstore.adapters.base import Adapter, adapter
from reelstore.backend import content
from reelstore.backend.repo import Repo
from reelstore.codec import FrozenMap, freeze
from reelstore.crashpoints import crash_point
from reelstore.drain import hold, owners
from reelstore.errors import BadInput, Conflict, LockHeld, NotFound, StaleLock
from reelstore.kernel import admission
from reelstore.kernel.views import Live, initiator, load_live
from reelstore.namespace.tree import Namespace
from reelstore.objects import Effect, Effects, Hash, View
from reelstore.wording import plural

CAS_ATTEMPTS = 64
"""Bound on compare-and-swap retries when other writers keep moving the view."""


def backoff(attempt: int) -> None:
    """Sleep a little, more after each lost race, jittered so racing writers spread out."""
    time.sleep(min(0.05, 0.0005 * (1 << min(attempt, 7))) * (0.5 + os.urandom(1)[0] / 256))


@dataclass(frozen=True)
class _Admission:
    """An effect as asked for; made into an `Effect` (with its sequence number) when it lands."""

    adapter: str
    effect_class: str
    resource: str
    delivery: str
    op: Any
    version_ref: Any
    link: Any = None
    key: str = ""


def give_up(exc: Conflict, attempt: int) -> bool:
    """A stale lock (its holder is dead, or it is too old) is worth one retry, not 64: it will not go
    away by itself, and each retry would only repeat the same E002. On the last attempt, a lock still
    held is reported as what it is rather than as a view that kept changing."""
    if isinstance(exc, LockHeld) and attempt == CAS_ATTEMPTS - 1:
        return True
    return isinstance(exc, StaleLock) and attempt >= 1


MAX_KEY = 512
"""Longest task key, in characters."""


def check_key(key: str) -> str:
    """E014 unless `key` can be a task key: 1 to 512 characters, no control characters."""
    if not isinstance(key, str) or not key or len(key) > MAX_KEY or any(ord(c) < 32 or ord(c) == 127 for c in key):
        raise BadInput(
            f"invalid task key {key!r}: a key is 1 to {MAX_KEY} characters without control characters", field="key"
        )
    return key


def _unique_key(key: str, queued: Mapping[str, int], view: str) -> None:
    """E014 if the view already holds an effect queued with task `key` (`queued`: task key -> its
    place in the buffer): one task, one effect."""
    if key in queued:
        raise BadInput(
            f"task key {key!r} is already queued in view {view!r} (effect {queued[key]}); a task has one effect",
            field="key",
            key=key,
        )


def check_name(path: str) -> str:
    """E014 unless `path` can be a name: 1 to 4096 characters, no NUL."""
    if not path or len(path) > 4096 or "\0" in path:
        raise BadInput(f"invalid name {path!r}: a name is 1 to 4096 characters without NUL")
    return path


class Transaction:
    """Changes to view `name`, landed together by `commit` (or dropped by `abort`)."""

    def __init__(self, repo: Repo, name: str, namespace: Namespace) -> None:
        self.repo = repo
        self.name = name
        self.ns = namespace
        self.live = load_live(repo, name)
        self.changes: dict[str, Hash | None] = {}
        """Name -> blob id, or None for a removal; the newest change of a name wins."""
        self._admissions: list[_Admission] = []
        self.effects: list[Effect] = []
        """The effects as admitted (and, after `commit`, as landed), in submission order."""
        self._tally: admission.Tally | None = None
        """The running totals of `live`'s buffer plus `effects`, built at the first effect."""
        self._keys: dict[str, int] | None = None
        """Task key -> place in the buffer, of `live`'s buffer plus `effects`: read at the first keyed effect."""
        self._who = ""
        """Whom `live`'s effects name (its initiator): read with `_tally`."""
        self._adapters: dict[str, Adapter] = {}
        """The adapters this transaction's effects were classified by, made once each."""
        self.state = "open"
        repo.objects.begin_batch()

    def __len__(self) -> int:
        return len(self.changes) + len(self._admissions)

    def _open(self) -> None:
        if self.state != "open":
            raise BadInput(f"the transaction on view {self.name!r} is {self.state}")

    # Class A

    def put(self, path: str, data: bytes) -> Hash:
        """Write `data` under `path` (needs write on `path`); returns the content id (a blob, or a
        chunk list over the chunking threshold)."""
        return self.put_stream(path, io.BytesIO(data))[0]

    def put_stream(self, path: str, stream: BinaryIO) -> tuple[Hash, int]:
        """`put` of everything `stream` yields, with bounded memory; (content id, size). The write
        capability is checked before any content is read."""
        self._open()
        check_name(path)
        admission.require(admission.view_caps(self.repo, self.live.view), "write", path)
        h, size = content.write(self.repo.objects, stream)
        self.changes[path] = h
        return h, size

    def put_stored(self, path: str, h: Hash) -> None:
        """Bind `path` to content `h` already in the store (a blob or a chunk list; E007 otherwise)."""
        self._open()
        check_name(path)
        admission.require(admission.view_caps(self.repo, self.live.view), "write", path)
        content.size(self.repo.objects, h)
        self.changes[path] = h

    def rm(self, path: str) -> None:
        """Remove `path` (needs delete on `path`; E001 if it is not there)."""
        self._open()
        check_name(path)
        admission.require(admission.view_caps(self.repo, self.live.view), "delete", path)
        if self.lookup(path) is None:
            raise NotFound(f"{path!r} is not in view {self.name}", name=path)
        self.changes[path] = None

    def lookup(self, path: str) -> Hash | None:
        """What `path` names as of this transaction (its pending changes over the view)."""
        if path in self.changes:
            return self.changes[path]
        return self.ns.get(self.live.view.namespace, path)

    def get(self, path: str) -> bytes:
        """The bytes under `path` as of this transaction (needs read; E001 if absent)."""
        return b"".join(self.read(path))

    def read(self, path: str) -> Iterator[bytes]:
        """`get`, piece by piece (bounded memory); the capability and the name are checked first."""
        admission.require(admission.view_caps(self.repo, self.live.view), "read", path)
        h = self.lookup(path)
        if h is None:
            raise NotFound(f"{path!r} is not in view {self.name}", name=path)
        return content.read(self.repo.objects, h)

    def ls(self, prefix: str = "") -> list[tuple[str, Hash]]:
        """The names under `prefix` as of this transaction that the view may read, in name order."""
        caps = admission.view_caps(self.repo, self.live.view)
        now = admission.now_s()
        return [(n, h) for n, h in self.items(prefix) if any(c.allows("read", n, now) for c in caps)]

    def items(self, prefix: str = "") -> Iterator[tuple[str, Hash]]:
        """Every name under `prefix` as of this transaction, in name order (no capability filter)."""
        pending = sorted((n, h) for n, h in self.changes.items() if n.startswith(prefix))
        at = 0
        for name, h in self.ns.items(self.live.view.namespace, prefix):
            while at < len(pending) and pending[at][0] < name:
                earlier, put = pending[at]
                if put is not None:
                    yield earlier, put
                at += 1
            if at < len(pending) and pending[at][0] == name:
                put = pending[at][1]
                if put is not None:
                    yield name, put
                at += 1
                continue
            yield name, h
        for name, value in pending[at:]:
            if value is not None:
                yield name, value

    # Class B and C

    def effect(
        self,
        adapter_name: str,
        op: Mapping[str, Any],
        effect_class: str | None = None,
        version_ref: Mapping[str, Any] | None = None,
        link: Mapping[str, str] | None = None,
        key: str | None = None,
    ) -> Effect:
        """Admit an effect (classified by its adapter, checked against the view's fire capabilities,
        budget, expiry and the store's hold). Nothing is sent. `link` goes into the effect's meta (a
        fresh attempt's `supersedes` and `approved_by`). `key` names the task this effect does: its
        operation id (and idempotency key) then derives from (trunk, key), so the same task queued
        again anywhere is refused (E008 naming the record that holds it) instead of sent twice."""
        self._open()
        hold.check(self.repo)
        if key is not None:
            check_key(key)
            owners.check_key(self.repo, self.live.trunk, key, owners.task_op_id(self.live.trunk, key))
        impl = self._adapters.get(adapter_name)
        if impl is None:
            impl = self._adapters[adapter_name] = adapter(adapter_name, self.repo)
        named: list[str] = []
        if adapter_name == "http":
            # Credentials leave the operation before it is stored (kept in .reel/secrets).
            from reelstore.backend.secrets import named_references, scrub_http, secret_store

            named = named_references(op)
            op = scrub_http(secret_store(self.repo), self.repo.config, op)
        # Validated and frozen once here; the adapter and the Effect take the frozen value as it is.
        op = freeze(op, "op")
        decided = impl.classify(op)
        if named:
            admission.admit_secrets(admission.view_caps(self.repo, self.live.view), named, decided.resource)
        klass = effect_class or decided.effect_class
        if klass not in ("B", "C"):
            raise BadInput(f"effect class must be B or C, not {klass!r}")
        ref = version_ref if version_ref is not None else decided.version_ref
        if klass == "B" and not ref:
            raise BadInput("a Class B effect needs a version ref (--version-ref KIND=VALUE)")
        wanted = _Admission(
            adapter_name,
            klass,
            decided.resource,
            decided.delivery,
            op,
            freeze(dict(ref)) if ref else None,
            dict(link) if link else None,
            key or "",
        )
        if self._tally is None:
            self._tally = buffer_tally(self.repo, self.live.view)
            self._who = initiator(self.repo, self.live.view)
        if wanted.key:
            if self._keys is None:
                self._keys = _task_keys(self.repo, self.live.view)
            _unique_key(wanted.key, self._keys, self.live.name)
        made = self._make(self.live, self._tally, wanted, self._who)
        if wanted.key:
            assert self._keys is not None
            self._keys[wanted.key] = self._tally.count - 1
        self._admissions.append(wanted)
        self.effects.append(made)
        return made

    def _make(self, live: Live, tally: admission.Tally, w: _Admission, principal: str) -> Effect:
        """The effect `w` as it lands on `live` after the effects `tally` counts: numbered and
        admitted against the running totals alone (nothing earlier is decoded or checked again)."""
        item = Effect(
            adapter=w.adapter,
            effect_class=w.effect_class,
            resource=w.resource,
            op=w.op,
            delivery=w.delivery,
            version_ref=w.version_ref,
            principal=principal,
            meta=freeze(
                {
                    "view": live.name,
                    "fork": live.view.meta.get("fork", ""),
                    "seq": tally.count,
                    **(w.link or {}),
                    **({"key": w.key} if w.key else {}),
                }
            )
            if w.link or w.key
            else FrozenMap({"view": live.name, "fork": live.view.meta.get("fork", ""), "seq": tally.count}),
        )
        tally.admit(item)
        return item

    def _admit(self, live: Live) -> tuple[list[Effect], admission.Tally]:
        """Every admission as it lands on `live`: numbered after its pending ones and admitted. Free
        when `live` is the view the effects were admitted on; else (another writer moved the view)
        each is made again on the newer view."""
        if self._tally is not None and live.id == self.live.id:
            return self.effects, self._tally
        tally = buffer_tally(self.repo, live.view)
        who = initiator(self.repo, live.view)
        keys = _task_keys(self.repo, live.view) if any(w.key for w in self._admissions) else {}
        made = []
        for w in self._admissions:
            if w.key:
                _unique_key(w.key, keys, live.name)
                keys[w.key] = tally.count
            made.append(self._make(live, tally, w, who))
        return made, tally

    # Landing

    def describe(self) -> str:
        """The reflog message: the one change, or the counts."""
        if len(self) == 1 and self.changes:
            ((path, value),) = self.changes.items()
            return f"{'put' if value is not None else 'rm'} {path}"
        if len(self) == 1:
            w = self._admissions[0]
            return f"effect {w.adapter} {w.resource}"
        puts = sum(v is not None for v in self.changes.values())
        return f"transaction: {puts} put, {len(self.changes) - puts} rm, {plural(len(self._admissions), 'effect')}"

    def _view_on(self, live: Live) -> tuple[View, list[Any]]:
        """The view object these changes make on top of `live` (changes re-checked against it)."""
        caps = admission.view_caps(self.repo, live.view)
        for path, value in self.changes.items():
            admission.require(caps, "write" if value is not None else "delete", path)
        root = self.ns.update(live.view.namespace, self.changes) if self.changes else live.view.namespace
        objects: list[Any] = []
        effects_id = live.view.effects
        if self._admissions:
            made, tally = self._admit(live)
            block = Effects(_pending_ids(self.repo, live.view) + tuple(e.id for e in made))
            objects += [*made, block]
            effects_id = block.id
            remember_tally(self.repo, block.id, tally)
            self.effects = made
        return replace(live.view, namespace=root, delta=None, effects=effects_id), objects

    def commit(self) -> View:
        """Land every change as one view object and one ref CAS; returns the view object now live.
        A transaction with no changes writes nothing."""
        self._open()
        try:
            view = self._land()
        except BaseException:
            self._finish("failed", ok=False)
            raise
        self._finish("committed", ok=True)
        return view

    def _land(self) -> View:
        if not len(self):
            return self.live.view
        live = self.live
        what = self.describe()
        for attempt in range(CAS_ATTEMPTS):
            if attempt:
                live = load_live(self.repo, self.name, settle=False)
            view, objects = self._view_on(live)
            self.repo.cache.save([*objects, view])
            tx = self.repo.refs.transaction(what, self.repo.principal()).update(live.ref, view.id, live.id)
            try:
                tx.commit()
            except Conflict as exc:
                if give_up(exc, attempt):
                    raise
                backoff(attempt)
                continue
            crash_point("transaction:landed")
            self.live = Live(self.name, view)
            return view
        raise Conflict(
            f"view {self.name!r} kept changing under {what}; gave up after {CAS_ATTEMPTS} attempts", view=self.name
        )

    def abort(self) -> None:
        """Drop every change: nothing of this transaction becomes visible."""
        if self.state == "open":
            self._finish("aborted", ok=False)

    def _finish(self, state: str, *, ok: bool) -> None:
        self.state = state
        if not ok:
            self.changes.clear()
        self.repo.objects.end_batch(keep=ok)

    def __enter__(self) -> Transaction:
        return self

    def __exit__(self, exc_type: object, *_: object) -> None:
        if self.state != "open":
            return
        if exc_type is None:
            self.commit()
        else:
            self.abort()


def _pending_ids(repo: Repo, view: View) -> tuple[Hash, ...]:
    if view.effects is None:
        return ()
    return repo.cache.load(view.effects, Effects).items


def _task_keys(repo: Repo, view: View) -> dict[str, int]:
    """Task key -> place in `view`'s buffer, of its pending effects queued with one (decoded once per
    transaction, and only when it admits a keyed effect)."""
    out: dict[str, int] = {}
    for i, h in enumerate(_pending_ids(repo, view)):
        key = owners.task_key(repo.cache.load(h, Effect))
        if key:
            out.setdefault(key, i)
    return out


TALLIES_KEPT = 64
"""Buffers whose budget use this store handle remembers (a view's newest buffer is the one used)."""


def _tallies(_repo: Repo) -> dict[Hash, dict[Hash, int]]:
    return {}


def remember_tally(repo: Repo, block: Hash, tally: admission.Tally) -> None:
    """Keep the budget use of the buffer `block`, so the next transaction on the view reads its totals
    instead of decoding every pending effect again."""
    kept = repo.attached(_tallies)
    if len(kept) >= TALLIES_KEPT:
        kept.clear()
    kept[block] = dict(tally.spent)


def buffer_tally(repo: Repo, view: View) -> admission.Tally:
    """The running totals of `view`'s pending buffer. Counting needs only the buffer's list of ids; a
    budgeted capability also needs what each pending effect's resource is, decoded once per buffer
    and store handle (then remembered), never per admission."""
    caps = admission.view_caps(repo, view)
    ids = _pending_ids(repo, view)
    budgeted = {c.id for c in caps if c.budget is not None}
    if view.effects is None or not budgeted:
        return admission.Tally(caps, len(ids))
    known = repo.attached(_tallies).get(view.effects)
    if known is not None and budgeted <= known.keys():
        return admission.Tally(caps, len(ids), known)
    tally = admission.Tally.of(caps, (repo.cache.load(h, Effect) for h in ids))
    remember_tally(repo, view.effects, tally)
    return tally
