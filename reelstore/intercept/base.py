"""The interception contract: a backend prepares the command's environment, captures what the command
does while it runs, and turns it into Class A writes or pending effects of the run's view.

A backend never commits and never fires anything: it only writes into the view through the kernel's
normal verbs, so capabilities, budgets and the hold apply exactly as they do to `reel put` and
`reel effect`. What the kernel refuses is reported as a `Refusal` and left out of the view.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from reelstore.backend.repo import Repo
from reelstore.errors import ReelError


@dataclass(frozen=True)
class Refusal:
    """Something the command tried that the view did not admit."""

    backend: str
    what: str
    """e.g. `POST http://h/pay` or `write docs/a.txt`."""
    code: str
    message: str
    exit_status: int

    @classmethod
    def of(cls, backend: str, what: str, err: ReelError) -> Refusal:
        return cls(backend, what, err.code, err.message, err.exit_status)

    def to_json(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "what": self.what,
            "code": self.code,
            "message": self.message,
            "exit": self.exit_status,
        }


@dataclass
class Launch:
    """How the command must be started so that the backends see what it does."""

    env: dict[str, str | None] = field(default_factory=dict)
    """Variables to set; None removes the variable from the command's environment."""
    cwd: str | None = None
    prefix: list[str] = field(default_factory=list)
    """Argv the command is started under (the sandbox: `unshare -n … netns.py … --`)."""
    proxy_port: int = 0
    """The port the command must reach the capturing proxy on, once a backend provides one (the sandbox
    forwards the same port inside the command's network namespace)."""


class Backend:
    """Base class. `start` before the command runs, `finish` after it exited, `close` always."""

    name = ""

    def __init__(self, repo: Repo, view: str) -> None:
        self.repo = repo
        self.view = view
        self.refused: list[Refusal] = []
        self.notes: list[str] = []
        """Things worth telling the user that are not refusals (a file left out, a request passed through)."""

    def start(self, launch: Launch) -> None:
        """Prepare: add to `launch` what the command needs to be intercepted."""

    def finish(self) -> None:
        """The command has exited: write what was captured into the view."""

    def close(self) -> None:
        """Release what `start` acquired (ports, temporary files). Safe to call more than once."""
