"""Service rules: how an outbound request is classed and delivered, decided by config, not by code.

    [service "pay"]
        match = http:POST:http://127.0.0.1:8080/pay
        class = C                      ; or B
        delivery = keyed               ; keyed | two-phase | queryable | blind
        key-header = Idempotency-Key   ; the operation id travels here on every attempt
        status-url = http://127.0.0.1:8080/pay/status/{key}   ; queryable / two-phase: 200 done, 404 absent
        commit-url = http://127.0.0.1:8080/pay/commit/{key}   ; two-phase: confirms a prepared request
        absence = unprovable           ; the target may act late: "no record found" proves nothing

`match` is a resource prefix matched on segment boundaries (`/` and `:`), like capabilities; the
longest matching rule wins. A request no rule matches is Class C, and `blind` if its method is unsafe.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from reelstore.errors import BadInput
from reelstore.objects.capability import prefix_covers
from reelstore.objects.effect import CLASSES, DELIVERIES

if TYPE_CHECKING:
    from reelstore.storage.config import Config

SAFE_METHODS = ("GET", "HEAD", "OPTIONS", "TRACE")
DEFAULT_KEY_HEADER = "Idempotency-Key"
ABSENCE = ("provable", "unprovable")


@dataclass(frozen=True)
class Service:
    name: str
    match: str
    effect_class: str = "C"
    delivery: str = "blind"
    key_header: str = DEFAULT_KEY_HEADER
    status_url: str | None = None
    commit_url: str | None = None
    absence: str = "provable"
    """`unprovable`: an operator's "no record found" is not proof of absence (the target can act late)."""

    def validate(self) -> Service:
        where = f'service "{self.name}"'
        if not self.match:
            raise BadInput(f"{where} has no match")
        if self.effect_class not in CLASSES:
            raise BadInput(f"{where}: class must be one of {', '.join(CLASSES)}, not {self.effect_class!r}")
        if self.delivery not in DELIVERIES:
            raise BadInput(f"{where}: delivery must be one of {', '.join(DELIVERIES)}, not {self.delivery!r}")
        if self.delivery in ("queryable", "two-phase") and not self.status_url:
            raise BadInput(f"{where}: {self.delivery} delivery needs a status-url with {{key}}")
        if self.delivery == "two-phase" and not self.commit_url:
            raise BadInput(f"{where}: two-phase delivery needs a commit-url with {{key}}")
        if self.absence not in ABSENCE:
            raise BadInput(f"{where}: absence must be one of {', '.join(ABSENCE)}, not {self.absence!r}")
        for url in (self.status_url, self.commit_url):
            if url is not None and "{key}" not in url:
                raise BadInput(f"{where}: {url!r} must contain {{key}}")
        return self


def services(config: Config) -> list[Service]:
    """Every configured service rule, validated (E014 on a bad rule); re-read only when the config changed."""
    return config.derived(_parse)


def _parse(config: Config) -> list[Service]:
    out = []
    for name in config.subsections("service"):
        def get(key: str, default: str | None = None, _n: str = name) -> str | None:
            return config.get(f"service.{_n}.{key}", default)

        out.append(Service(
            name=name,
            match=get("match", "") or "",
            effect_class=(get("class", "C") or "C").upper(),
            delivery=(get("delivery", "blind") or "blind").lower(),
            key_header=get("key-header", DEFAULT_KEY_HEADER) or DEFAULT_KEY_HEADER,
            status_url=get("status-url"),
            commit_url=get("commit-url"),
            absence=(get("absence", "provable") or "provable").lower(),
        ).validate())
    return out


def classify(config: Config, resource: str, method: str) -> Service:
    """The rule for `resource` (longest match), or the default: Class C, blind if the method is unsafe."""
    best: Service | None = None
    for svc in services(config):
        if prefix_covers(svc.match, resource) and (best is None or len(svc.match) > len(best.match)):
            best = svc
    if best is not None:
        return best
    delivery = "keyed" if method.upper() in SAFE_METHODS else "blind"
    return Service(name="", match="", effect_class="C", delivery=delivery)
