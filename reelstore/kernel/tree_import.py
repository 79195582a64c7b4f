"""Importing files from the file system into a view, all in one transaction (`reel put VIEW DIR…`,
`reel put VIEW --stdin-paths`).

A name is the file's path relative to the working directory, with `/` separators. Only regular files
are stored, as bytes: a namespace maps names to blobs, so modes (the executable bit included) are not
kept. A symbolic link is neither followed nor stored, nor is any other special file; each is reported.
The store's own `.reel` directory is never imported. Files are streamed one at a time into the
transaction's pack (large ones as content-defined chunks), so memory stays bounded whatever the size.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from reelstore.errors import BadInput, input_error
from reelstore.kernel.transaction import Transaction

SKIP_DIRS = (".reel",)


@dataclass
class ImportReport:
    """What an import wrote and what it left out (path, reason)."""

    count: int = 0
    bytes: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        return {
            "count": self.count,
            "bytes": self.bytes,
            "skipped": [{"path": p, "reason": r} for p, r in self.skipped],
        }


def name_of(path: str, cwd: Path) -> str:
    """The name a file is stored under: its path relative to `cwd` (E014 if it lies outside)."""
    full = Path(os.path.abspath(cwd / path))
    try:
        rel = full.relative_to(cwd)
    except ValueError:
        raise BadInput(
            f"{path!r} is outside the working directory {cwd}; run reel from a directory that contains it"
        ) from None
    name = rel.as_posix()
    if name in ("", "."):
        raise BadInput(f"{path!r} names the working directory itself, not a file in it")
    return name


def _walk(top: str, cwd: Path, report: ImportReport) -> Iterator[tuple[str, str]]:
    """(path, name) of the regular-file candidates under `top` (inside `cwd`), in name order; links
    to directories go to the report. Plain string paths: this runs once per file."""
    root = str(cwd)
    start = os.path.abspath(os.path.join(root, top))
    for dirpath, dirs, files in os.walk(start, followlinks=False):
        rel = os.path.relpath(dirpath, root).replace(os.sep, "/")
        prefix = "" if rel == "." else rel + "/"
        keep = []
        for d in sorted(dirs):
            if d in SKIP_DIRS:
                continue
            if os.path.islink(os.path.join(dirpath, d)):
                report.skipped.append((prefix + d, "symbolic link (not followed)"))
                continue
            keep.append(d)
        dirs[:] = keep
        for f in sorted(files):
            yield os.path.join(dirpath, f), prefix + f


def import_paths(
    tx: Transaction, paths: Iterable[str], cwd: Path, progress: Callable[[int], None] | None = None
) -> ImportReport:
    """Put every regular file named by `paths` (a directory stands for every file under it) into the
    transaction `tx`; nothing lands until the caller commits it."""
    report = ImportReport()
    cwd = cwd.resolve()
    for path in paths:
        try:
            st = os.lstat(cwd / path)
        except FileNotFoundError:
            raise BadInput(f"{path!r} does not exist") from None
        if stat.S_ISDIR(st.st_mode):
            if Path(os.path.abspath(cwd / path)) != cwd:
                name_of(path, cwd)  # E014 for a directory outside the working directory
            files: Iterable[tuple[str, str]] = _walk(path, cwd, report)
        else:
            files = ((str(cwd / path), name_of(path, cwd)),)
        for file, name in files:
            st = os.lstat(file)
            if stat.S_ISLNK(st.st_mode):
                report.skipped.append((name, "symbolic link (not followed)"))
                continue
            if not stat.S_ISREG(st.st_mode):
                report.skipped.append((name, "not a regular file"))
                continue
            try:
                with open(file, "rb") as f:
                    _, size = tx.put_stream(name, f)
            except OSError as exc:
                raise input_error(exc, file) from None
            report.count += 1
            report.bytes += size
            if progress is not None and report.count % 1000 == 0:
                progress(report.count)
    return report
