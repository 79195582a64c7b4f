"""`reel update-ref`: set or delete one ref by compare-and-swap, or run git's `--stdin` transaction protocol."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from typing import Any

import click

from reelstore.backend.op_log import operation
from reelstore.backend.refdb.refs import ANY, RefTransaction
from reelstore.backend.repo import Repo
from reelstore.cli.complete import REFS
from reelstore.cli.context import Context, pass_ctx
from reelstore.cli.refargs import full_ref, new_value, old_value
from reelstore.errors import BadInput
from reelstore.objects import Hash
from reelstore.objects.ref import check_target


def _hex(h: Hash | None) -> str | None:
    return h.hex() if h is not None else None


class Session:
    """One `--stdin` session: a sequence of transactions, each all-or-nothing.

    Without `start`, every command joins one implicit transaction committed at end of input. After
    `start`, the transaction is committed only by `commit`; one left open at end of input is aborted,
    as git does. A failed command aborts the open transaction and ends the session with its error.
    """

    def __init__(self, repo: Repo, message: str, quiet: bool = False, create_reflog: bool = False) -> None:
        self.repo = repo
        self.message = message
        self.quiet = quiet
        self.create_reflog = create_reflog
        self.tx: RefTransaction | None = None
        self.explicit = False
        self.closed = False
        self.said: list[str] = []
        self.changes: list[dict[str, Any]] = []

    def _open(self) -> RefTransaction:
        if self.tx is None:
            if self.closed:
                raise BadInput("transaction is closed; send start to begin another")
            self.tx = self.repo.refs.transaction(self.message, self.repo.principal(), create_reflog=self.create_reflog)
        return self.tx

    def _ack(self, word: str) -> None:
        self.said.append(f"{word}: ok")
        if not self.quiet:
            click.echo(f"{word}: ok")

    def run(self, commands: Iterable[tuple[str, list[str] | None]]) -> None:
        """Run (line, arguments) pairs: arguments None means the line is split on spaces (text mode)."""
        try:
            for number, (line, args) in enumerate(commands, 1):
                line = line.rstrip("\n")
                if line.strip():
                    self.command(line, number, args)
            if self.tx is not None:
                if self.explicit:
                    self.tx.abort()
                else:
                    self._commit()
        except BaseException:
            if self.tx is not None:
                self.tx.abort()
            raise

    def command(self, line: str, number: int, given: list[str] | None = None) -> None:
        verb, *args = line.split(" ") if given is None else [line.partition(" ")[0], *given]
        if verb == "option":
            if args != ["no-deref"]:
                raise BadInput(f"line {number}: unknown option {' '.join(args)!r} (the only option is no-deref)")
            return
        if verb in ("start", "prepare", "commit", "abort"):
            if args:
                raise BadInput(f"line {number}: {verb} takes no arguments")
            getattr(self, "do_" + verb)()
            return
        arity = {"update": (2, 3), "create": (2, 2), "delete": (1, 2), "verify": (1, 2)}.get(verb)
        if arity is None:
            raise BadInput(f"line {number}: unknown command {verb!r}")
        if not arity[0] <= len(args) <= arity[1]:
            raise BadInput(f"line {number}: {verb} takes {arity[0]} to {arity[1]} arguments, got {len(args)}")
        tx = self._open()
        if tx.state != "open":
            raise BadInput(f"line {number}: the transaction is already prepared; send commit or abort")
        add(self.repo, tx, verb, args)

    def do_start(self) -> None:
        """As git: `start` makes the open transaction explicit (commands before it join it)."""
        if self.explicit:
            raise BadInput("start: cannot restart the transaction already started")
        self.closed = False
        self._open()
        self.explicit = True
        self._ack("start")

    def do_prepare(self) -> None:
        self._open().prepare()
        self._ack("prepare")

    def do_commit(self) -> None:
        self._open()
        self._commit()
        self._ack("commit")

    def do_abort(self) -> None:
        self._open().abort()
        self._finish()
        self._ack("abort")

    def _commit(self) -> None:
        assert self.tx is not None
        self.tx.prepare()
        self.changes += _changes(self.repo, self.tx)
        self.tx.commit()
        self._finish()

    def _finish(self) -> None:
        self.tx = None
        self.explicit = False
        self.closed = True


def _target(repo: Repo, name: str, text: str) -> Hash | None:
    """The new value of `name`, refused (E014) unless it has the kind the ref's namespace needs."""
    new = new_value(repo, text)
    if new is not None:
        check_target(name, repo.objects.kind(new))  # the tag alone: the hash covers it
    return new


def add(repo: Repo, tx: RefTransaction, verb: str, args: list[str]) -> None:
    """Add one protocol command (`update`, `create`, `delete`, `verify`) to `tx`."""
    name = full_ref(repo, args[0])
    if verb == "create":
        new = _target(repo, name, args[1])
        if new is None:
            raise BadInput(f"create {name}: the new value cannot be zero")
        tx.create(name, new)
    elif verb == "update":
        new = _target(repo, name, args[1])
        old = old_value(repo, args[2]) if len(args) > 2 else ANY
        if new is None:
            _delete(repo, tx, name, old)
        else:
            tx.update(name, new, old)
    elif verb == "delete":
        old = ANY if len(args) < 2 else old_value(repo, args[1])
        if old is None:
            raise BadInput(f"delete {name}: the old value cannot be zero")
        _delete(repo, tx, name, old)
    else:
        tx.verify(name, old_value(repo, args[1]) if len(args) > 1 else None)


def _delete(repo: Repo, tx: RefTransaction, name: str, old: Any) -> None:
    """Delete by CAS; deleting an absent ref with no expected value only checks it stays absent (as git)."""
    if old is ANY and repo.refs.get(name) is None:
        tx.verify(name, None)
    elif old is None:
        raise BadInput(f"cannot delete {name} on the condition that it does not exist")
    else:
        tx.delete(name, old)


_NUL_ARGS = {"update": 2, "create": 1, "delete": 1, "verify": 1}


def nul_commands(data: Iterable[bytes]) -> Iterator[tuple[str, list[str] | None]]:
    """git's `-z` form: `VERB SP REF NUL` then the verb's values, each ended by NUL; an empty value is
    an omitted one (update's and delete's OLD: no check; verify's OLD: the ref must not exist)."""
    fields = iter(data)
    for head_bytes in fields:
        head = head_bytes.decode("utf-8", "replace")
        verb, _, first = head.partition(" ")
        if verb not in _NUL_ARGS:
            yield head, [first] if first else []
            continue
        values = []
        for _ in range(_NUL_ARGS[verb]):
            value = next(fields, None)
            if value is None:
                raise BadInput(f"{verb} {first}: the input ends before its values (-z wants NUL after each)")
            values.append(value.decode("utf-8", "replace"))
        while values and values[-1] == "":
            values.pop()
        yield head, [first, *values]


def _nul_fields() -> Iterator[bytes]:
    """Stdin's NUL-terminated fields; a last field without its NUL is malformed input, as in git."""
    data = sys.stdin.buffer.read()
    if data and not data.endswith(b"\0"):
        raise BadInput("with -z every field must end with NUL")
    yield from data.split(b"\0")[:-1]


def _changes(repo: Repo, tx: RefTransaction) -> list[dict[str, Any]]:
    """What a prepared transaction will write; its locks are held, so the current values are final."""
    out = []
    for name, upd in sorted(tx.updates.items()):
        if not upd.verify_only:
            out.append({"ref": name, "old": _hex(repo.refs.get(name)), "new": _hex(upd.new)})
    return out


@click.command("update-ref")
@click.option("-d", "delete", is_flag=True, help="Delete REF (after checking OLD, if given).")
@click.option("-m", "message", default="", help="Reflog message.")
@click.option("--stdin", "use_stdin", is_flag=True, help="Read update/create/delete/verify commands from stdin.")
@click.option("-z", "nul", is_flag=True, help="With --stdin: NUL-terminated fields, as git's -z.")
@click.option("--no-deref", is_flag=True, help="Accepted for git's scripts: reel has no symbolic refs to follow.")
@click.option("--create-reflog", is_flag=True, help="Keep a reflog for REF even outside heads, views and remotes.")
@click.argument("args", nargs=-1, shell_complete=REFS)
@pass_ctx
@operation("update-ref")
def update_ref(
    ctx: Context,
    delete: bool,
    message: str,
    use_stdin: bool,
    nul: bool,
    no_deref: bool,
    create_reflog: bool,
    args: tuple[str, ...],
) -> None:
    """Set REF to NEW if it currently holds OLD (zeros or '' for OLD: REF must not exist).

    \b
    reel update-ref [-m MSG] REF NEW [OLD]
    reel update-ref -d [-m MSG] REF [OLD]
    reel update-ref --stdin [-z] [-m MSG]   (start, update REF NEW [OLD], create REF NEW,
                                delete REF [OLD], verify REF [OLD], option no-deref, prepare, commit, abort)
    --no-deref is accepted and changes nothing: reel has no symbolic refs.
    """
    repo = ctx.repo
    if use_stdin:
        if args or delete:
            raise click.UsageError("--stdin takes no REF arguments and no -d")
        session = Session(repo, message, quiet=ctx.json, create_reflog=create_reflog)
        if nul:
            session.run(nul_commands(_nul_fields()))
        else:
            session.run((line.decode("utf-8", "replace"), None) for line in sys.stdin.buffer)
        ctx.emit({"acknowledged": session.said, "updated": session.changes})
        return
    if nul:
        raise click.UsageError("-z needs --stdin")
    want = (1, 2) if delete else (2, 3)
    if not want[0] <= len(args) <= want[1]:
        raise click.UsageError("usage: update-ref [-m MSG] REF NEW [OLD]  |  update-ref -d REF [OLD]")
    name = full_ref(repo, args[0])
    if not delete and not args[1]:
        raise BadInput("the new value cannot be empty; use -d to delete")
    tx = repo.refs.transaction(message, repo.principal(), create_reflog=create_reflog)
    add(repo, tx, "delete" if delete else "update", [name, *args[1:]])
    tx.prepare()
    changes = _changes(repo, tx)
    tx.commit()
    ctx.emit(changes[0] if changes else {"ref": name, "old": None, "new": None})


COMMANDS = [update_ref]
