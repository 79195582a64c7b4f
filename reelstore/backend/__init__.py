"""Where bytes live: the backend, behind one narrow seam.

Everything above the backend reaches bytes through a `Repo` (repo.py): `repo.objects`, an `ObjectStore`
(object_store.py); `repo.refs`, a `RefStore` (refs.py); `repo.config` and `repo.files`, the small state
files. What the layers above ask of an object store:

- typed reads and writes: `get`, `get_as`, `kind`, `get_raw`, `has`, `resolve`, iteration; `put`,
  `put_many`, `put_verified`, `reuse`. Every read re-hashes what it read (E007 on damage).
- a write batch: `batch()` (with `flush` before a ref may name what it holds, and `detach_batch` /
  `attach_batch` to carry it from one thread to the next): one durable write for many objects.
- `gc(mark, cutoff, ...)`: the backend lists its candidates, calls `mark` (maintenance's walk: what
  is live), and drops what is neither live nor in flight and was last written before `cutoff`.
- `fsck(...)`: the backend checks every object it holds, and its own storage, naming the damage.
- `protected()`, the ids of writes in flight (gc's fence keeps them), and `segment(trunk)`, a journal
  file of its own (None: the journal is objects and a ref).

Of a ref store: `get`, `list`, `set` and `delete` (compare-and-swap), `transaction()` (every ref locked
in name order and every expected value checked before anything moves), `reflog`, `stale_locks`.

A new backend implements the six primitives of `ObjectStore` (`has`, `get_raw`, `_store`, `__iter__`,
`mtime`, `delete`) and those of `RefStore` (`_read`, `_lock`, `_unlock`, `_apply`, `names`,
`reflog`); everything else has a default built on them (gc and fsck object by object, upkeep.py). The
disk backend (disk_store.py) keeps loose files and packs (pack*.py, write_batch.py, roll_up.py), its
gc, repack, prune and check in pack_gc.py, its journal segments in segment.py. Nothing above the backend
names a pack or a loose file, except the plumbing commands about them (pack-objects, verify-pack,
index-pack, unpack-objects, count-objects) and the disk-only repack and prune, which ask for the disk
backend with `disk_store.on_disk`.
"""
