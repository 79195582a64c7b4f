"""A scratch directory: the command works on real files, and what it changed becomes Class A writes.

Before the command runs, the view's names (those its capabilities let it read; with a prefix, only
names under it) are written out as files under a temporary directory, one file per name, the name
being the relative path. After the command exits the directory is compared with what was written:
a new or modified regular file is a `put`, a missing one an `rm`, each checked by the kernel (so
`write` / `delete` capabilities apply) and all landed as one transaction: one view object, one ref
update, one fsync of the objects, however many files changed. Names that cannot be files (an absolute path, `.` or `..`
segments, a name that is also another name's directory) are left out and reported; symbolic links
and other special files the command leaves are ignored and reported, as are files outside the prefix.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from reelstore.backend import content
from reelstore.backend.repo import Repo
from reelstore.errors import ReelError
from reelstore.intercept.base import Backend, Launch, Refusal
from reelstore.kernel import verbs as kernel
from reelstore.kernel.transaction import Transaction
from reelstore.objects import Hash

SCRATCH_VAR = "REEL_SCRATCH"


def _representable(name: str) -> bool:
    parts = name.split("/")
    return not name.startswith("/") and all(p not in ("", ".", "..") for p in parts) and "\0" not in name


class Scratch(Backend):
    name = "scratch"

    def __init__(self, repo: Repo, view: str, prefix: str = "") -> None:
        super().__init__(repo, view)
        self.prefix = prefix
        self.root: Path | None = None
        self.written: dict[str, Hash] = {}
        """Name → blob id of every file put in the directory before the command ran."""
        self.changes: list[tuple[str, str]] = []
        """(added | modified | removed, name) the view took, in the order written."""

    def start(self, launch: Launch) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="reel-run-"))
        if "/" in self.prefix and _representable(self.prefix.rpartition("/")[0]):
            (self.root / self.prefix.rpartition("/")[0]).mkdir(parents=True, exist_ok=True)
        for name, h in kernel.ls(self.repo, self.view, self.prefix):
            if not _representable(name):
                self.notes.append(f"left out {name!r}: not a relative file path")
                continue
            path = self.root / name
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                with open(path, "xb") as f:
                    for piece in kernel.read(self.repo, self.view, name):
                        f.write(piece)
            except (FileExistsError, NotADirectoryError, IsADirectoryError):
                self.notes.append(f"left out {name!r}: it is also another name's directory")
                continue
            self.written[name] = h
        launch.cwd = str(self.root)
        launch.env[SCRATCH_VAR] = str(self.root)

    def finish(self) -> None:
        assert self.root is not None, "the scratch directory is not started"
        seen: dict[str, Path] = {}
        for top, dirs, files in os.walk(self.root):
            for d in [d for d in dirs if (Path(top) / d).is_symlink()]:
                self.notes.append(f"ignored {(Path(top) / d).relative_to(self.root).as_posix()!r}: a symbolic link")
            dirs.sort()
            for fname in sorted(files):
                path = Path(top) / fname
                name = path.relative_to(self.root).as_posix()
                if path.is_symlink() or not path.is_file():
                    self.notes.append(f"ignored {name!r}: not a regular file")
                elif not name.startswith(self.prefix):
                    self.notes.append(f"ignored {name!r}: outside --dir {self.prefix!r}")
                else:
                    seen[name] = path
        with kernel.transaction(self.repo, self.view) as tx:
            for name in sorted(set(self.written) - set(seen)):
                self._apply(tx, "removed", name, None)
            for name, path in seen.items():
                old = self.written.get(name)
                try:
                    with open(path, "rb") as f:
                        h = content.write(self.repo.objects, f)[0]
                except OSError as exc:
                    self.notes.append(f"ignored {name!r}: cannot be read ({exc.strerror})")
                    continue
                if h != old:
                    self._apply(tx, "modified" if old is not None else "added", name, h)

    def _apply(self, tx: Transaction, how: str, name: str, h: Hash | None) -> None:
        """Bind or remove `name` in the transaction; its content (if any) is already stored, piece by
        piece, in the transaction's batch."""
        try:
            if h is None:
                tx.rm(name)
            else:
                tx.put_stored(name, h)
        except ReelError as err:
            self.refused.append(Refusal.of(self.name, f"{'delete' if h is None else 'write'} {name}", err))
            return
        self.changes.append((how, name))

    def close(self) -> None:
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None
