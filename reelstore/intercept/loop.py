"""The dry-run loop behind `reel run`: fork a view, run a command with its effects intercepted, then
commit or abort the view as a whole.

    loop = DryRun(store, cmd)            # forks the view
    loop.execute()                       # runs the command under the backends; nothing leaves the machine
    loop.summary()                       # what the view would land: changes, pending effects, refusals
    loop.commit() or loop.abort()

The backends are replaceable: anything with the `Backend` shape can be passed instead of the default
HTTP proxy and scratch directory. If anything goes wrong before a decision is taken (an exception, an
interrupt), the view is aborted, so a half-run command can never be committed by accident.
"""

from __future__ import annotations

import os
import secrets
import shlex
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from typing import IO, Any
from urllib.parse import urlsplit

from reelstore.api import Store
from reelstore.backend.repo import Repo
from reelstore.backend.secrets import redact, scrubbed_names
from reelstore.backend.service_rules import model_origin
from reelstore.errors import Conflict
from reelstore.intercept.base import Backend, Launch, Refusal
from reelstore.intercept.http_proxy import HttpProxy
from reelstore.intercept.sandbox import Sandbox, require_unshare
from reelstore.intercept.scratch import Scratch
from reelstore.kernel import verbs as kernel
from reelstore.objects import Capability, Effect, Hash
from reelstore.objects.ref import view_ref

SENTINELS = ("localhost:80", "localhost:443")
"""Inside the sandbox, direct connections to the usual web ports on loopback are caught too."""
VIEW_VAR = "REEL_VIEW"
"""The command is told its view's name, so it can also use `reel` verbs on it directly."""


def run_name() -> str:
    """A fresh view name: `run-<UTC time>-<4 hex>`."""
    return f"run-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{secrets.token_hex(2)}"


def default_backends(
    prefix: str = "",
    allow: Sequence[str] = (),
    sandbox: bool = True,
    proxy: Callable[[Repo, str], Backend] | None = None,
    models: Sequence[str] = (),
) -> list[Callable[[Repo, str], Backend]]:
    """The HTTP(S) proxy (loopback hosts reachable only if in `allow`, and the model paths of the local
    model servers in `models`; `proxy` replaces it, e.g. with one that records or replays), a scratch
    directory (limited to names under `prefix`) and, unless `sandbox` is False, the network namespace
    the command runs in. E014 if a namespace cannot be made here: the caller must choose to run
    without one."""
    makers: list[Callable[[Repo, str], Backend]] = [
        proxy or (lambda repo, view: HttpProxy(repo, view, allow, models=models)),
        lambda repo, view: Scratch(repo, view, prefix),
    ]
    if sandbox:
        unshare = require_unshare()
        caught = [*allow, *(hp for hp in map(model_host_port, models) if _local(hp)), *SENTINELS]
        makers.append(lambda repo, view: Sandbox(repo, view, unshare, caught))
    return makers


def model_host_port(origin: str) -> str:
    """`http://127.0.0.1:8000` -> `127.0.0.1:8000`: a model server's address, which the sandbox watches
    for direct connections like an `--allow` target's."""
    parts = urlsplit(model_origin(origin))
    return f"{parts.netloc}" if parts.port else f"{parts.netloc}:{443 if parts.scheme == 'https' else 80}"


class DryRun:
    def __init__(
        self,
        store: Store,
        cmd: Sequence[str],
        view: str | None = None,
        source: str | None = None,
        caps: Sequence[Capability | str] | None = None,
        backends: Sequence[Callable[[Repo, str], Backend]] | None = None,
    ) -> None:
        self.store = store
        self.cmd = list(cmd)
        self.view = store.fork(view or run_name(), source, caps)
        try:
            self.backends = [make(store.repo, self.view.name) for make in (backends or default_backends())]
        except BaseException:
            self.view.abort()  # a backend refused its arguments: no view is left behind
            raise
        self.status: int | None = None
        """The command's exit status (negative: killed by that signal), once it ran."""
        self.decision: str | None = None
        self.notes: list[str] = []
        self.shown: Hash | None = None
        """The view object the summary describes; a commit of anything else is refused."""
        self.changes: list[dict[str, Any]] = []
        self.effects: list[dict[str, Any]] = []
        self.result: kernel.CommitResult | None = None

    @property
    def name(self) -> str:
        return self.view.name

    def execute(self, stdout: IO[Any] | int | None = None) -> int:
        """Run the command under every backend and write what it did into the view. A failure on the
        way aborts the view before the error propagates."""
        try:
            launch = Launch()
            for b in self.backends:
                b.start(launch)
            env = dict(os.environ)
            for k, v in launch.env.items():
                if v is None:
                    env.pop(k, None)
                else:
                    env[k] = v
            env[VIEW_VAR] = self.name
            self.status = self._spawn(launch.prefix, launch.cwd, env, stdout)
            for b in self.backends:
                b.finish()
            ref = view_ref(self.name)
            before = self.store.repo.refs.get(ref)
            self.changes = [{"status": d.status, "name": d.name} for d in self.view.diff()]
            self.effects = [_effect_line(i, e) for i, e in enumerate(self.view.status().effects)]
            self.shown = before if self.store.repo.refs.get(ref) == before else None
        except BaseException:
            self.abort()
            raise
        finally:
            for b in self.backends:
                b.close()
        return self.status

    def _spawn(self, prefix: list[str], cwd: str | None, env: dict[str, str], stdout: IO[Any] | int | None) -> int:
        """The command's exit status; 127 / 126 (as a shell says) if it cannot be found / started."""
        if prefix and not _runnable(self.cmd[0], cwd, env.get("PATH")):
            self.notes.append(f"cannot run {self.cmd[0]!r}: no such executable")
            return 127
        try:
            proc = subprocess.Popen([*prefix, *self.cmd], cwd=cwd, env=env, stdout=stdout)
        except OSError as exc:
            self.notes.append(f"cannot run {self.cmd[0]!r}: {exc.strerror or exc}")
            return 127 if isinstance(exc, FileNotFoundError) else 126
        try:
            return proc.wait()
        except BaseException:
            proc.kill()
            proc.wait()
            raise

    @property
    def refused(self) -> list[Refusal]:
        return [r for b in self.backends for r in b.refused]

    @property
    def blocked(self) -> list[dict[str, Any]]:
        """Connections the command tried around the proxy, which the sandbox stopped."""
        return [b for be in self.backends for b in getattr(be, "blocked", ())]

    @property
    def clean(self) -> bool:
        """The command exited 0, nothing it tried was refused or failed to be intercepted, and it tried
        nothing around the proxy: the only run `--commit` lands (unless forced)."""
        return self.status == 0 and not self.refused and not self.blocked

    @property
    def secret_values(self) -> set[str]:
        return {v for b in self.backends for v in getattr(b, "secret_values", ())}

    def shown_command(self) -> str:
        """The command line as messages and summaries show it: credentials as `<secret>`."""
        return redact(shlex.join(self.cmd), self.secret_values)

    def summary(self) -> dict[str, Any]:
        """What the view holds (as of the command's exit), what was refused, and the decision."""
        secret = self.secret_values
        return {
            "view": self.name,
            "command": [redact(a, secret) for a in self.cmd],
            "status": self.status,
            "clean": self.clean,
            "changes": self.changes,
            "effects": self.effects,
            "refused": [r.to_json() for r in self.refused],
            "blocked": self.blocked,
            "passed": [p for b in self.backends for p in getattr(b, "passed", ())],
            "model_calls": [c for b in self.backends for c in getattr(b, "model_calls", ())],
            "divergences": [d.to_json() for b in self.backends for d in getattr(b, "divergences", ())],
            "notes": self.notes + [n for b in self.backends for n in b.notes],
            "decision": self.decision,
            "commit": self.result.to_json() if self.result else None,
        }

    def commit(self, message: str = "") -> kernel.CommitResult:
        """Commit the view as summarized: E002, nothing committed, if anyone wrote to it since."""
        if self.store.repo.refs.get(view_ref(self.name)) != self.shown:
            raise Conflict(
                f"view {self.name!r} changed after its summary was taken; nothing was committed. "
                f"Inspect it with `reel status {self.name}`, then commit or abort it",
                view=self.name,
            )
        self.decision = "commit"
        self.result = self.view.commit(message or f"reel run: {self.shown_command()}"[:200])
        return self.result

    def abort(self) -> None:
        self.decision = "abort"
        if self.view.live:
            self.view.abort()


def _local(host_port: str) -> bool:
    host = host_port.rpartition(":")[0].strip("[]").lower()
    return host == "localhost" or host.startswith("127.") or host == "::1"


def _runnable(prog: str, cwd: str | None, path: str | None) -> bool:
    """Checked before the sandbox starts the command, so that a typo is reported as one (exit 127)."""
    if "/" in prog:
        return os.access(os.path.join(cwd or ".", prog), os.X_OK)
    return shutil.which(prog, path=path) is not None


def _effect_line(index: int, e: Effect) -> dict[str, Any]:
    return {
        "index": index,
        "id": e.id.hex(),
        "adapter": e.adapter,
        "method": e.op.get("method"),
        "url": e.op.get("url"),
        "resource": e.resource,
        "class": e.effect_class,
        "delivery": e.delivery,
        "scrubbed": scrubbed_names(e.op),
    }
