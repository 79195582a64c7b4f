"""What both ways of reaching a remote share, below both (sync/transport and sync/dulwich_client): is a
program on PATH, does a URL name a local repository, and a remote's words as text."""

from __future__ import annotations

import os
from urllib.parse import urlparse


def on_path(program: str) -> bool:
    """Is `program` an executable in a directory of PATH? `shutil.which`'s answer on POSIX, without
    importing shutil, whose import (bz2, lzma, fnmatch) every push and fetch would pay."""
    for directory in os.get_exec_path():
        path = os.path.join(directory, program)
        if os.access(path, os.X_OK) and not os.path.isdir(path):
            return True
    return False


def local_repository(url: str) -> str | None:
    """The directory `url` names if it is a plain path or a file:// URL of an existing directory (as
    dulwich reads it: a `:` makes a path an ssh address), else None."""
    path = urlparse(url).path if url.startswith("file://") else url
    if ":" in path or not os.path.isdir(path):
        return None
    return path


def text(value: object) -> str:
    """A remote's words for a person: bytes decoded (never a Python `b'…'` repr), whitespace trimmed."""
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "replace").strip()
    if isinstance(value, BaseException):
        parts = [text(a) for a in value.args] or [type(value).__name__]
        return "; ".join(p for p in parts if p) or type(value).__name__
    return str(value).strip()
