"""Capability: attenuating authority over names and effect resources.

`prefix` matches on segment boundaries (`/` and `:`), never as a raw string prefix, so
`http:POST:http://h/refunds` covers `.../refunds/42` but not `.../refunds-x`. Expiry is an absolute
Unix time in seconds; budget bounds how many effects a view may submit. None means unbounded.

The `secret` operation grants credentials, not names: its prefix is `REF@RESOURCE`, where REF is a
stored secret's NAME, `env:VAR`, or `*` (any), and RESOURCE a resource prefix as above, so
`secret=stripe@http:POST:https://api.stripe.com/` lets an effect to that API carry the secret
`stripe` and nothing else. `secret=stripe` grants it for any destination; an empty prefix grants every
secret everywhere (a trunk with no configured capability has that authority). The prefix is read this way
for the `secret` operation only, so a secret grant is best a capability of its own.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable
from dataclasses import dataclass
from typing import ClassVar

from reelstore.errors import BadInput
from reelstore.objects.block import Object, register, v_int, v_opt, v_str, v_tuple

OPS = ("read", "write", "delete", "fire_b", "fire_c", "secret")
SEPARATORS = "/:"


def prefix_covers(prefix: str, name: str) -> bool:
    """True if `name` lies under `prefix` on a segment boundary."""
    if not prefix or name == prefix:
        return True
    if not name.startswith(prefix):
        return False
    return prefix[-1] in SEPARATORS or name[len(prefix)] in SEPARATORS


def secret_covers(prefix: str, grant: str) -> bool:
    """True if the secret grant `prefix` (`REF@RESOURCE`) covers `grant` (a reference and a resource, or
    a narrower grant)."""
    if not prefix:
        return True
    want_ref, _, want_res = prefix.partition("@")
    ref, _, res = grant.partition("@")
    return want_ref in ("*", ref) and prefix_covers(want_res, res)


def _op(value: object, where: str) -> str:
    if value not in OPS:
        raise BadInput(f"{where}: unknown operation {value!r}; expected one of {', '.join(OPS)}")
    return value


@register
@dataclass(frozen=True)
class Capability(Object):
    kind: ClassVar[str] = "capability"
    ops: tuple[str, ...]
    prefix: str
    expires_at: int | None = None
    budget: int | None = None
    SPEC: ClassVar = {
        "budget": ("budget", v_opt(v_int())),
        "expires_at": ("expires_at", v_opt(v_int())),
        "ops": ("ops", v_tuple(_op, len(OPS))),
        "prefix": ("prefix", v_str()),
    }

    def validate(self) -> None:
        if list(self.ops) != sorted(set(self.ops), key=OPS.index):
            raise BadInput("capability ops must be distinct and in canonical order")

    @classmethod
    def make(
        cls, ops: Iterable[str], prefix: str = "", expires_at: int | None = None, budget: int | None = None
    ) -> Capability:
        """Build a capability from ops in any order."""
        listed = list(ops)
        for op in listed:
            _op(op, "capability")
        return cls(tuple(sorted(set(listed), key=OPS.index)), prefix, expires_at, budget)

    def widening(self, child: Capability) -> str | None:
        """The first axis on which `child` is wider than this capability, or None if covered."""
        if not set(child.ops) <= set(self.ops):
            return "ops"
        # A capability holding `secret` and other ops is read both ways; the child must be covered each way
        # it is read, or a mixed child could name a secret its parent never granted.
        if "secret" in child.ops and not self._covers(child.prefix, True):
            return "prefix"
        if set(child.ops) - {"secret"} and not self._covers(child.prefix, False):
            return "prefix"
        if self.expires_at is not None and (child.expires_at is None or child.expires_at > self.expires_at):
            return "expiry"
        if self.budget is not None and (child.budget is None or child.budget > self.budget):
            return "budget"
        return None

    def allows(self, op: str, name: str, now: int | None = None) -> bool:
        """Does this capability authorise `op` on `name` at time `now` (budget is the kernel's)?"""
        if op not in self.ops or not self._covers(name, op == "secret"):
            return False
        return self.expires_at is None or now is None or now < self.expires_at

    def _covers(self, name: str, secret: bool) -> bool:
        return secret_covers(self.prefix, name) if secret else prefix_covers(self.prefix, name)

    def spec(self) -> str:
        """The command-line form, `OPS=PREFIX[;expires=ISO-8601][;budget=N]`."""
        text = f"{','.join(self.ops)}={self.prefix}"
        if self.expires_at is not None:
            when = _dt.datetime.fromtimestamp(self.expires_at, _dt.timezone.utc)
            text += f";expires={when.strftime('%Y-%m-%dT%H:%M:%SZ')}"
        if self.budget is not None:
            text += f";budget={self.budget}"
        return text

    @classmethod
    def parse(cls, text: str) -> Capability:
        """Parse `OPS=PREFIX[;expires=ISO-8601][;budget=N]` (E014 on anything malformed)."""
        head, sep, _ = text.partition("=")
        if not sep:
            raise BadInput(f"capability {text!r} must look like OPS=PREFIX[;expires=ISO][;budget=N]")
        rest = text[len(head) + 1 :]
        prefix, *options = rest.split(";")
        expires_at = budget = None
        for option in options:
            key, eq, value = option.partition("=")
            if key == "expires" and eq:
                expires_at = parse_time(value)
            elif key == "budget" and eq and value.isdigit():
                budget = int(value)
            else:
                raise BadInput(f"capability option {option!r} is not expires=ISO-8601 or budget=N")
        ops = [op.strip() for op in head.split(",") if op.strip()]
        if not ops:
            raise BadInput(f"capability {text!r} names no operation")
        return cls.make(ops, prefix, expires_at, budget)


def parse_time(text: str) -> int:
    """An ISO-8601 time (Z or offset; naive means UTC) as Unix seconds."""
    try:
        when = _dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise BadInput(f"not an ISO-8601 time: {text!r}") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=_dt.timezone.utc)
    return int(when.timestamp())
