"""Service rules: how an outbound request is classed and delivered, decided by config, not by code.

    [service "pay"]
        match = http:POST:http://127.0.0.1:8080/pay
        class = C                      ; or B; or read: no side effect, passes through `reel run` at once
        delivery = keyed               ; keyed | two-phase | queryable | blind
        key-header = Idempotency-Key   ; the operation id travels here on every attempt
        status-url = http://127.0.0.1:8080/pay/status/{key}   ; queryable / two-phase: 200 done, 404 absent
        commit-url = http://127.0.0.1:8080/pay/commit/{key}   ; two-phase: confirms a prepared request
        absence = unprovable           ; the target may act late: "no record found" proves nothing
        absent-after = 120             ; queryable / two-phase: seconds after an attempt before a 404 proves
                                       ; it absent (default: http.timeout plus a margin)
        suffix = :generateContent      ; optional: the path must also end with this
        approval = required            ; a commit holding such an effect waits for approvals (`reel approve`)
        approval-count = 2             ; how many distinct approvers (default 1)
        approvers = ops-leads          ; only members of this group count (`group.ops-leads.member`)

`match` is a resource prefix matched on segment boundaries (`/` and `:`), like capabilities; a rule
may also name a `suffix` the request's path must end with (Gemini's `:generateContent` follows the
model's name in the path). The longest matching rule (match plus suffix) wins; a query string is not
part of what rules match. A request no rule matches is Class C, and `blind` if its method is unsafe.

A `read` rule declares requests that change nothing (a model's completion, a search, an embedding):
they are sent at once, never queued. Built-in read rules cover the model APIs agents call on their
public hosts (`BUILTIN`: OpenAI-compatible and Anthropic paths, Gemini's suffixes); a configured rule
of the same name replaces one, and `model_rules` makes the model paths (Ollama's included)
read-like on a local model server.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from reelstore.errors import BadInput
from reelstore.objects.capability import prefix_covers
from reelstore.objects.effect import CLASSES, DELIVERIES

if TYPE_CHECKING:
    from reelstore.backend.config import Config

SAFE_METHODS = ("GET", "HEAD", "OPTIONS", "TRACE")
READ = "READ"
"""The class of a rule whose requests have no side effect: they pass through, never queued."""
MODEL_PATHS = (
    "/v1/chat/completions",
    "/v1/completions",
    "/v1/responses",
    "/v1/embeddings",  # OpenAI-compatible
    "/v1/messages",  # Anthropic
    "/api/chat",
    "/api/generate",
    "/api/embed",
    "/api/embeddings",  # Ollama
)
"""Model API paths that only compute an answer; `model_rules` makes them read-like on a given host."""
GEMINI_SUFFIXES = (":generateContent", ":streamGenerateContent", ":embedContent", ":batchEmbedContents", ":countTokens")
"""Gemini's model methods, which follow `/v1beta/models/NAME` in the path."""
GEMINI_HOST = "https://generativelanguage.googleapis.com"
DEFAULT_KEY_HEADER = "Idempotency-Key"
ABSENCE = ("provable", "unprovable")
MAX_APPROVERS = 16


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
    absent_after: float | None = None
    """Seconds after an attempt began during which the status URL's 404 is no proof of absence (the
    request may still be on its way or in processing); None: the adapter's default."""
    suffix: str = ""
    """The request's path must also end with this (empty: any path under `match`)."""
    builtin: bool = False
    """One of `BUILTIN` (shown as such by `reel config --services`), not a configured rule."""
    approvals: int = 0
    """How many distinct approvers an effect under this rule needs before a commit may fire it (0: none)."""
    approvers: str = ""
    """The group (`group.NAME.member`) whose members' approvals count; empty: any other principal."""

    def validate(self) -> Service:
        where = f'service "{self.name}"'
        if not self.match:
            raise BadInput(f"{where} has no match")
        if self.effect_class not in (*CLASSES, READ):
            raise BadInput(f"{where}: class must be one of {', '.join(CLASSES)} or read, not {self.effect_class!r}")
        if self.delivery not in DELIVERIES:
            raise BadInput(f"{where}: delivery must be one of {', '.join(DELIVERIES)}, not {self.delivery!r}")
        if self.delivery in ("queryable", "two-phase") and not self.status_url:
            raise BadInput(f"{where}: {self.delivery} delivery needs a status-url with {{key}}")
        if self.delivery == "two-phase" and not self.commit_url:
            raise BadInput(f"{where}: two-phase delivery needs a commit-url with {{key}}")
        if self.absence not in ABSENCE:
            raise BadInput(f"{where}: absence must be one of {', '.join(ABSENCE)}, not {self.absence!r}")
        if self.absent_after is not None and not 0 <= self.absent_after <= 7 * 86400:
            raise BadInput(f"{where}: absent-after must be a number of seconds in [0, 604800]")
        if not 0 <= self.approvals <= MAX_APPROVERS:
            raise BadInput(f"{where}: approval-count must be from 1 to {MAX_APPROVERS}")
        if self.approvers and not self.approvals:
            raise BadInput(f"{where}: approvers = {self.approvers} needs approval = required")
        for url in (self.status_url, self.commit_url):
            if url is not None and "{key}" not in url:
                raise BadInput(f"{where}: {url!r} must contain {{key}}")
        return self

    def covers(self, resource: str) -> bool:
        """`resource` (its query string left out) lies under `match` and ends with `suffix`."""
        path = resource.split("?", 1)[0]
        return prefix_covers(self.match, path) and path.endswith(self.suffix)

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "match": self.match,
            "suffix": self.suffix or None,
            "class": "read" if self.read_like else self.effect_class,
            "delivery": self.delivery,
            "key_header": self.key_header,
            "status_url": self.status_url,
            "commit_url": self.commit_url,
            "absence": self.absence,
            "approvals": self.approvals,
            "approvers": self.approvers or None,
            "builtin": self.builtin,
        }

    @property
    def read_like(self) -> bool:
        """Requests under this rule change nothing: they are sent at once, never queued as effects."""
        return self.effect_class == READ


def model_rules(
    origin: str, prefix: str = "model", paths: Iterable[str] = MODEL_PATHS, builtin: bool = False
) -> list[Service]:
    """Read rules for the built-in model paths on `origin` (`http://127.0.0.1:8000`): a local model server
    declared read-like path by path, not host-wide, so its other routes stay pending effects. E014 if
    `origin` is not an http(s) origin."""
    origin = model_origin(origin)
    return [
        Service(
            name=f"{prefix}{path.replace('/', '-')}",
            match=f"http:POST:{origin}{path}",
            effect_class=READ,
            delivery="keyed",
            builtin=builtin,
        ).validate()
        for path in paths
    ]


def model_origin(spec: str) -> str:
    """`http://127.0.0.1:8000/` -> `http://127.0.0.1:8000`, as the proxy spells URLs (no default port);
    E014 naming the value if it is not an http(s) origin."""
    parts = urlsplit(spec.strip())
    try:
        port = parts.port
    except ValueError:
        port = -1
    if (
        parts.scheme not in ("http", "https")
        or not parts.hostname
        or port == -1
        or parts.path.strip("/")
        or parts.query
        or parts.username
    ):
        raise BadInput(f"--model wants an origin such as http://127.0.0.1:8000, not {spec!r}")
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    default = 443 if parts.scheme == "https" else 80
    return f"{parts.scheme}://{host}" + (f":{port}" if port not in (None, default) else "")


BUILTIN: tuple[Service, ...] = (
    *model_rules("https://api.openai.com", "openai", MODEL_PATHS[:4], builtin=True),
    *model_rules("https://api.anthropic.com", "anthropic", MODEL_PATHS[4:5], builtin=True),
    *(
        Service(
            name=f"gemini-{s.lstrip(':')}",
            match=f"http:POST:{GEMINI_HOST}/",
            suffix=s,
            effect_class=READ,
            delivery="keyed",
            builtin=True,
        ).validate()
        for s in GEMINI_SUFFIXES
    ),
)
"""Read rules every store has unless a configured rule of the same name replaces it."""


def services(config: Config) -> list[Service]:
    """Every service rule in force: the configured ones, validated (E014 on a bad rule), then the built-in
    ones no configured rule of the same name replaces; re-read only when the config changed."""
    return config.derived(_parse)


def _parse(config: Config) -> list[Service]:
    out = []
    for name in config.subsections("service"):

        def get(key: str, default: str | None = None, _n: str = name) -> str | None:
            return config.get(f"service.{_n}.{key}", default)

        out.append(
            Service(
                name=name,
                match=get("match", "") or "",
                effect_class=(get("class", "C") or "C").upper(),
                delivery=(get("delivery", "blind") or "blind").lower(),
                key_header=get("key-header", DEFAULT_KEY_HEADER) or DEFAULT_KEY_HEADER,
                status_url=get("status-url"),
                commit_url=get("commit-url"),
                absence=(get("absence", "provable") or "provable").lower(),
                absent_after=_seconds(get("absent-after"), f'service "{name}": absent-after'),
                suffix=get("suffix", "") or "",
                approvals=_approvals(name, get("approval"), get("approval-count")),
                approvers=(get("approvers", "") or "").strip(),
            ).validate()
        )
    named = {svc.name for svc in out}
    return out + [svc for svc in BUILTIN if svc.name not in named]


def _approvals(name: str, approval: str | None, count: str | None) -> int:
    """How many approvers rule `name` needs: `approval = required | none`, `approval-count` (default 1)."""
    where = f'service "{name}"'
    mode = (approval or "none").strip().lower()
    if mode not in ("required", "none"):
        raise BadInput(f"{where}: approval must be required or none, not {approval!r}")
    if count is not None and not (count.strip().isdigit() and 1 <= int(count) <= MAX_APPROVERS):
        raise BadInput(f"{where}: approval-count must be from 1 to {MAX_APPROVERS}, not {count!r}")
    return int(count) if count is not None and mode == "required" else int(mode == "required")


def rule_for(config: Config, resource: str) -> Service | None:
    """The configured or built-in rule whose match covers `resource` (the longest), if any."""
    best: Service | None = None
    for svc in services(config):
        if prefix_covers(svc.match, resource) and (best is None or len(svc.match) > len(best.match)):
            best = svc
    return best


def classify(config: Config, resource: str, method: str, extra: Iterable[Service] = ()) -> Service:
    """The rule for `resource` (longest match among the rules in force and `extra`), or the default:
    Class C, blind if the method is unsafe."""
    best: Service | None = None
    for svc in (*services(config), *extra):
        if svc.covers(resource) and (
            best is None or len(svc.match) + len(svc.suffix) > len(best.match) + len(best.suffix)
        ):
            best = svc
    if best is not None:
        return best
    delivery = "keyed" if method.upper() in SAFE_METHODS else "blind"
    return Service(name="", match="", effect_class="C", delivery=delivery)


def _seconds(text: str | None, where: str) -> float | None:
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        raise BadInput(f"{where} must be a number of seconds, not {text!r}") from None
