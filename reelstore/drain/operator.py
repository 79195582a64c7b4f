"""The operator's contract for unresolved operations: assignment, escalation, notices and acknowledgment.

The AGI Reactor specimen asks that a blocked operation show, together, who owns its reconciliation,
who it was escalated to and by when, which notices were delivered and which acknowledged — and that
these stay distinct: assigning is not alerting, a delivered notice is not an acknowledged one, and
no notice, acknowledgment or dismissal settles the operation or lifts the drain's halt. Only
evidence does (`reel reconcile`); an operator may instead close the incident with the uncertainty
accepted, which keeps the effect, its journal and this history exactly as they are.

Every action is an attributed `opevent` object chained to the operation's previous one under
`refs/ops/<op>`, moved by compare-and-swap. Notices are bounded: at most `ops.maxNotices` (default 3)
per operation and recipient, so a stuck operation cannot flood anyone; past an escalation deadline
the notices go to the escalation owner.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field
from typing import Any

from reelstore.backend.repo import Repo
from reelstore.backend.secrets import SHOWN, hide_params, redact, secret_store, sensitive_headers, sensitive_params
from reelstore.codec import thaw
from reelstore.drain import journal as drainlog
from reelstore.drain.ops import LOCAL, UNRESOLVED, Operation, OpSource
from reelstore.errors import BadInput, CapabilityViolation, Conflict
from reelstore.hooks.runner import hook_path
from reelstore.objects import Hash, OpEvent

OPS_PREFIX = "refs/ops/"
DEFAULT_MAX_NOTICES = 3
NOTIFY_TIMEOUT_S = 30
CAS_ATTEMPTS = 16


@dataclass(frozen=True)
class OperatorState:
    """What the operator events of one operation say, newest decision winning (`reel ops show`)."""

    events: tuple[OpEvent, ...] = ()
    assignee: str = ""
    escalated_to: str = ""
    deadline: int = 0
    notices: tuple[OpEvent, ...] = ()
    acks: tuple[OpEvent, ...] = ()
    closed: OpEvent | None = None

    def overdue(self, now_ms: int) -> bool:
        return bool(self.deadline) and self.closed is None and now_ms > self.deadline

    def to_json(self, now_ms: int | None = None) -> dict[str, Any]:
        now = drainlog.clock() if now_ms is None else now_ms
        return {
            "assignee": self.assignee or None,
            "escalated_to": self.escalated_to or None,
            "deadline": self.deadline or None,
            "overdue": self.overdue(now),
            "notices": [{"to": e.to, "time": e.time, "result": e.result, "by": e.actor} for e in self.notices],
            "acks": [{"by": e.actor, "time": e.time, "note": e.note} for e in self.acks],
            "closed": (
                {"by": self.closed.actor, "time": self.closed.time, "note": self.closed.note} if self.closed else None
            ),
            "events": [e.id.hex() for e in self.events],
        }


def _ref(op: str) -> str:
    return OPS_PREFIX + op


def state(repo: Repo, op: str) -> OperatorState:
    """The operation's operator history, oldest first, folded into its current state."""
    chain: list[OpEvent] = []
    h: Hash | None = repo.refs.get(_ref(op))
    while h is not None and len(chain) < 1 << 16:
        event = repo.objects.get_as(h, OpEvent)
        chain.append(event)
        h = event.prev
    events = tuple(reversed(chain))
    assignee = escalated_to = ""
    deadline = 0
    closed = None
    for e in events:
        if e.action == "assign":
            assignee = e.to
        elif e.action == "escalate":
            escalated_to, deadline = e.to, e.deadline
        elif e.action == "close":
            closed = e
    return OperatorState(
        events,
        assignee,
        escalated_to,
        deadline,
        tuple(e for e in events if e.action == "notify"),
        tuple(e for e in events if e.action == "ack"),
        closed,
    )


def _record(repo: Repo, op: str, action: str, actor: str, **fields: Any) -> OpEvent:
    """Append one event to the operation's chain (CAS on `refs/ops/<op>`)."""
    if not actor.strip():
        raise BadInput(f"`{action}` needs the name of who does it")
    ref = _ref(op)
    for _ in range(CAS_ATTEMPTS):
        prev = repo.refs.get(ref)
        event = OpEvent(op=op, action=action, actor=actor, time=drainlog.clock(), prev=prev, **fields)
        repo.objects.put(event)
        try:
            repo.refs.set(ref, event.id, prev, message=f"ops {action}", principal=actor)
            return event
        except Conflict:
            continue
    raise Conflict(f"operation {op}'s operator history kept moving; try again", op=op)


def _unresolved(repo: Repo, name: str, source: OpSource) -> Operation:
    found = source.find(repo, name)
    if found.state not in UNRESOLVED:
        raise Conflict(f"operation {found.op} is {found.state}: there is nothing left to resolve", op=found.op)
    return found


def assign(repo: Repo, name: str, to: str, by: str | None = None, source: OpSource = LOCAL) -> OpEvent:
    """Make `to` the operation's reconciliation owner."""
    found = _unresolved(repo, name, source)
    if not to.strip():
        raise BadInput("--to needs a name")
    return _record(repo, found.op, "assign", by or repo.principal(), to=to)


def escalate(
    repo: Repo, name: str, to: str, deadline_ms: int = 0, by: str | None = None, source: OpSource = LOCAL
) -> OpEvent:
    """Name an escalation owner and, optionally, when the operation becomes overdue."""
    found = _unresolved(repo, name, source)
    if not to.strip():
        raise BadInput("--to needs a name")
    return _record(repo, found.op, "escalate", by or repo.principal(), to=to, deadline=deadline_ms)


def ack(repo: Repo, name: str, by: str, note: str = "", source: OpSource = LOCAL) -> OpEvent:
    """Record that `by` knows of the operation. Recorded apart from notices: an operator reached another
    way (a phone call) acknowledges without a delivered notice. It settles nothing and lifts no halt."""
    found = source.find(repo, name)
    return _record(repo, found.op, "ack", by, note=note)


def close(
    repo: Repo, name: str, by: str, note: str = "", accept_uncertainty: bool = False, source: OpSource = LOCAL
) -> OpEvent:
    """End the incident for an operation whose outcome cannot be established, accepting that. The
    effect, its journal (still `unknown`) and the operator history all stay; nothing is sent."""
    found = _unresolved(repo, name, source)
    if not accept_uncertainty:
        raise BadInput("closing an unresolved operation needs --accept-uncertainty: its outcome stays unknown")
    if found.state != "unknown":
        raise BadInput(
            f"operation {found.op} is {found.state}, not unknown: nothing was sent, so there is no "
            "uncertainty to accept; `reel recover` sends it, or `reel reconcile --outcome absent` gives "
            "it up"
        )
    if state(repo, found.op).closed is not None:
        raise Conflict(f"operation {found.op} is already closed", op=found.op)
    return _record(repo, found.op, "close", by, note=note or "uncertainty accepted")


def request(repo: Repo, o: Operation) -> dict[str, Any]:
    """What the effect asked the target for, as the operator searches the target's side for it: an
    http request's method, URL, headers and body, any other adapter's op. Credentials show as
    `<secret>`: the op holds none (they were scrubbed at admission), and any value of this op's own
    secrets that a body carries is hidden too."""
    op = dict(thaw(o.effect.op))
    hidden = _secret_values(repo, op.pop("secrets", None))
    if o.effect.adapter != "http":
        return {"adapter": o.effect.adapter, "op": _hide(op, hidden)}
    body = op.get("json", op.get("body"))
    params = sensitive_params(repo.config)
    return {
        "adapter": "http",
        "method": str(op.get("method", "")),
        "url": redact(hide_params(str(op.get("url", "")), params), hidden),
        "headers": _hide(op.get("headers") or {}, hidden),
        "body": _hide(body, hidden, sensitive_headers(repo.config) | params),
    }


def _secret_values(repo: Repo, refs: Any) -> list[str]:
    """The values this op's secret references stand for, where they can be read (to hide them)."""
    store = secret_store(repo)
    out = []
    for group in (refs or {}).values():
        for ref in (group or {}).values():
            try:
                out.append(store.resolve(str(ref)))
            except BadInput:
                continue
    return out


def _hide(value: Any, hidden: list[str], keys: frozenset[str] = frozenset()) -> Any:
    """`value` with every known secret value shown as `<secret>`, and so the value of any key named
    like a sensitive header or parameter."""
    if isinstance(value, dict):
        return {
            k: SHOWN if str(k).lower() in keys or str(k) in keys else _hide(v, hidden, keys) for k, v in value.items()
        }
    if isinstance(value, list):
        return [_hide(v, hidden, keys) for v in value]
    if isinstance(value, str):
        return redact(value, hidden)
    return value


@dataclass
class NotifyReport:
    sent: list[OpEvent] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    """op -> why no notice went out (bounded, closed, no notifier)."""

    def to_json(self) -> dict[str, Any]:
        return {"sent": [{"op": e.op, "to": e.to, "result": e.result} for e in self.sent], "skipped": self.skipped}


def notify(repo: Repo, now_ms: int | None = None, source: OpSource = LOCAL) -> NotifyReport:
    """Run the `notify` hook once per unresolved, unclosed operation and record each delivery with its
    result. The recipient is the assignee (or `unassigned`); past the deadline, the escalation owner."""
    now = drainlog.clock() if now_ms is None else now_ms
    report = NotifyReport()
    hook = hook_path(repo, "notify")
    limit = max_notices(repo)
    for o in source.list_ops(repo, True):
        st = state(repo, o.op)
        if st.closed is not None:
            report.skipped[o.op] = "closed"
            continue
        to = st.escalated_to if st.overdue(now) and st.escalated_to else (st.assignee or "unassigned")
        if sum(1 for e in st.notices if e.to == to) >= limit:
            report.skipped[o.op] = f"{limit} notices already went to {to} (ops.maxNotices)"
            continue
        if hook is None:
            report.skipped[o.op] = "no executable .reel/hooks/notify"
            continue
        result = _deliver(repo, hook, o, to, st, now)
        report.sent.append(_record(repo, o.op, "notify", repo.principal(), to=to, result=result))
    return report


def max_notices(repo: Repo) -> int:
    """How many notices one recipient gets about one thing (`ops.maxNotices`), so nobody is flooded."""
    text = repo.config.get("ops.maxNotices", str(DEFAULT_MAX_NOTICES)) or str(DEFAULT_MAX_NOTICES)
    if not text.isdigit() or not 0 < int(text) <= 1000:
        raise BadInput(f"config ops.maxNotices = {text!r} is not a count from 1 to 1000")
    return int(text)


def _deliver(repo: Repo, hook: os.PathLike[str], o: Operation, to: str, st: OperatorState, now: int) -> str:
    env = dict(os.environ)
    env.update(
        {
            "REEL_DIR": str(repo.path),
            "REEL_HOOK": "notify",
            "REEL_OP": o.op,
            "REEL_STATE": o.state,
            "REEL_TO": to,
            "REEL_TRUNK": o.trunk,
            "REEL_RECORD": o.record.hex(),
            "REEL_RESOURCE": o.effect.resource,
            "REEL_OVERDUE": "1" if st.overdue(now) else "0",
            "REEL_NEXT": o.next_action,
        }
    )
    try:
        done = subprocess.run([os.fspath(hook)], env=env, capture_output=True, timeout=NOTIFY_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return f"not delivered: the notify hook ran past {NOTIFY_TIMEOUT_S}s"
    except OSError as err:
        return f"not delivered: {err.strerror or err}"
    if done.returncode != 0:
        why = done.stderr.decode("utf-8", "replace").strip().splitlines()
        return f"not delivered: the notify hook exited {done.returncode}" + (f": {why[-1][:200]}" if why else "")
    return "delivered"


def supersede_link(repo: Repo, name: str, approved_by: str, initiator: str, source: OpSource = LOCAL) -> dict[str, str]:
    """The link a fresh attempt at operation `name` carries: a new, separately authorised effect (its
    own operation id) that names its predecessor. It never erases the predecessor's duplicate risk:
    the predecessor keeps its state and history. Refused (E009) when the approver is its initiator
    (`initiator`: the principal of the view that queues it, whom the effect names) or whoever asks."""
    found = source.find(repo, name)
    if found.state == "succeeded":
        raise Conflict(f"operation {found.op} succeeded: there is nothing to attempt again", op=found.op)
    if not approved_by.strip():
        raise BadInput("a fresh attempt needs --approved-by NAME")
    if approved_by in (initiator, repo.principal()):
        raise CapabilityViolation(
            f"a fresh attempt at {found.op} must be approved by someone other than its initiator ({approved_by})"
        )
    return {"supersedes": found.op, "approved_by": approved_by, "predecessor_state": found.state}
