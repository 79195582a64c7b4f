"""The `fs` adapter: Class C file writes and deletes under one declared root directory.

Operations are JSON maps: `{"action": "write", "path": "out/a.txt", "content": "text"}` (optional
`"mode": "0644"`) and `{"action": "delete", "path": "out/a.txt"}`. The root is config
`adapter.fs.root` (relative to the directory holding `.reel`; default that directory itself).
A path is refused (E014 at admission, `failed` at drain) if it is absolute, contains `..`, or
resolves through a symlink to a place outside the root.

Delivery is `keyed`: both operations are idempotent on the target's state (writing the same bytes
again, deleting a missing file), so resending after a crash converges to the state the effect names,
and reconcile can tell by looking whether a write already landed.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any

import blake3

from reelstore.adapters.base import Adapter, Admission, Result, register
from reelstore.errors import BadInput
from reelstore.objects import Effect
from reelstore.storage.fileio import atomic_write

ACTIONS = ("write", "delete")
MAX_CONTENT = 16 * 1024 * 1024


def _relative(path: Any) -> str:
    if not isinstance(path, str) or not path or "\0" in path or len(path) > 4096:
        raise BadInput("fs op needs a non-empty string 'path'")
    pure = PurePosixPath(path)
    if pure.is_absolute() or path.startswith("\\") or (len(path) > 1 and path[1] == ":"):
        raise BadInput(f"fs path {path!r} is absolute; paths are relative to the adapter's root")
    if any(part == ".." for part in pure.parts):
        raise BadInput(f"fs path {path!r} contains '..'")
    parts = [p for p in pure.parts if p != "."]
    if not parts:
        raise BadInput(f"fs path {path!r} names the root itself")
    return "/".join(parts)


@register
class FsAdapter(Adapter):
    name = "fs"

    def root(self) -> Path:
        configured = self.repo.config.get("adapter.fs.root")
        top = self.repo.path.parent if self.repo.path is not None else Path.cwd()
        return (top / configured) if configured else top

    def classify(self, op: Mapping[str, Any]) -> Admission:
        action = op.get("action")
        if action not in ACTIONS:
            raise BadInput(f"fs op 'action' must be one of {', '.join(ACTIONS)}, not {action!r}")
        path = _relative(op.get("path"))
        extra = set(op) - {"action", "path", "content", "mode"}
        if extra:
            raise BadInput(f"fs op has unknown fields {sorted(extra)}")
        if action == "write":
            content = op.get("content")
            if not isinstance(content, str) or len(content.encode("utf-8")) > MAX_CONTENT:
                raise BadInput(f"fs write needs a string 'content' of at most {MAX_CONTENT} bytes")
            _mode(op)
        elif "content" in op or "mode" in op:
            raise BadInput("fs delete takes only 'path'")
        if self.repo.path is not None:
            self.target(path)
        return Admission(resource=f"fs:{path}", effect_class="C", delivery="keyed")

    def target(self, path: str) -> Path:
        """The file `path` names under the root, refusing anything that resolves outside it."""
        root = Path(os.path.realpath(self.root()))
        full = Path(os.path.realpath(root / _relative(path)))
        if full != root and root not in full.parents:
            raise BadInput(f"fs path {path!r} resolves to {full}, outside the root {root}")
        if full == root:
            raise BadInput(f"fs path {path!r} names the root itself")
        return full

    def fire(self, effect: Effect, token: Any, op_id: str) -> Result:
        token.consume(effect.id)
        op = effect.op
        try:
            full = self.target(str(op.get("path")))
        except BadInput as exc:
            return Result("failed", note=exc.message)
        if op.get("action") == "delete":
            existed = full.is_file() or full.is_symlink()
            full.unlink(missing_ok=True)
            return Result("succeeded", {"path": str(full), "deleted": existed})
        data = str(op.get("content", "")).encode("utf-8")
        full.parent.mkdir(parents=True, exist_ok=True)
        if Path(os.path.realpath(full.parent)) != full.parent:
            return Result("failed", note=f"{full.parent} moved outside the root while creating it")
        atomic_write(full, data, mode=_mode(op), fsync=self.repo.config.get_bool("core.fsync", True))
        return Result("succeeded", {"path": str(full), "bytes": len(data), "blake3": blake3.blake3(data).hexdigest()})

    def reconcile(self, effect: Effect, op_id: str) -> str:
        op = effect.op
        try:
            full = self.target(str(op.get("path")))
        except BadInput:
            return "absent"
        if op.get("action") == "delete":
            return "absent" if full.exists() else "succeeded"
        try:
            same = full.read_bytes() == str(op.get("content", "")).encode("utf-8")
        except OSError:
            return "absent"
        return "succeeded" if same else "absent"


def _mode(op: Mapping[str, Any]) -> int:
    raw = op.get("mode", "0644")
    if not isinstance(raw, str) or not raw.isdigit() or len(raw) > 4 or any(c > "7" for c in raw):
        raise BadInput(f"fs 'mode' must be an octal string like '0644', not {raw!r}")
    mode = int(raw, 8)
    if mode & 0o7000:
        raise BadInput("fs 'mode' may not set setuid, setgid or sticky bits")
    return mode
