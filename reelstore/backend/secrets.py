"""The local secret store: credentials an effect needs, kept out of every content-addressed object.

An http effect's op never holds a credential. Where one was (a sensitive header's value, a configured
query parameter's value) the op holds the text `<secret>`, and a `secrets` map says where the drain
finds the real value at send time:

    {"method": "POST", "url": "https://h/pay?token=<secret>",
     "headers": {"Authorization": "<secret>"},
     "secrets": {"headers": {"Authorization": "store:h-3f…"}, "params": {"token": "env:PAY_TOKEN"}}}

A reference is `store:NAME` (the secret NAME: from the configured secret backend, if any, see
`SecretBackend`, else the file `.reel/secrets/NAME`, mode 0600, in a 0700 directory outside
`.reel/objects`; sync never reads it, so it is never pushed or fetched) or `env:VAR` (the drain's
environment). Scrubbing happens at effect admission, for every path in: `reel run`'s proxy, `reel
effect`, the Python API. A raw sensitive value is moved into the store under a name derived by a keyed
hash (the key is local, so the name reveals nothing about the value, and the same value is stored
once). Callers may also give references directly: a header or parameter value `{"$secret": "stripe"}`
or `{"$env": "STRIPE_KEY"}`. A reference the caller names (rather than one made here from a value it
gave) is authority over a credential it never saw: admission lets it through only if a `secret`
capability of the view grants that secret for the effect's resource (`named_references`).

What counts as a credential, by name (case-insensitive), by default:
- a header whose name contains `auth`, `token`, `key`, `secret`, `passw`, `cookie`, `session` or
  `signature` (Authorization, X-Auth-Token, Private-Token, X-Goog-Api-Key, X-Amz-Security-Token,
  Api-Key, Cookie, …), except `Idempotency-Key` (a delivery key, not a credential);
- a query parameter, or a field of an `application/x-www-form-urlencoded` body, named `key`, `sig`,
  `code`, `auth` or `pwd`, or whose name contains `token`, `secret`, `passw`, `signature`,
  `api_key`/`apikey`, `access_key`, `session` or `credential` (access_token, api_key, password, …).
`[secrets] header = NAME` and `[secrets] param = NAME` (repeatable) add names (a param name covers
form fields too); `[secrets] plain = NAME` (repeatable) exempts a header, parameter or field name
from the defaults. A scrubbed form field is a `fields` entry of the `secrets` map.
"""

from __future__ import annotations

import hmac
import os
import re
import secrets as pysecrets
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import parse_qsl, quote, urlsplit, urlunsplit

from reelstore.backend.config import Config
from reelstore.backend.fileio import atomic_write
from reelstore.codec import thaw
from reelstore.errors import BadInput

SHOWN = "<secret>"
"""What stands in an op, a message, a summary or a log where a credential was."""
SECRETS_DIR = "secrets"
KEY_FILE = ".key"
DEFAULT_HEADERS = ("authorization", "proxy-authorization", "cookie", "x-api-key")
"""Named for `redact`, which finds them in a quoted command line; scrubbing uses the patterns below."""
HEADER_PATTERN = re.compile(r"auth|token|key|secret|passw|cookie|session|signature")
PARAM_PATTERN = re.compile(
    r"^(key|sig|code|auth|pwd)$|token|secret|passw|signature|api_?key|access_?key|session"
    r"|credential"
)
PLAIN_BY_DEFAULT = frozenset(("idempotency-key",))
FORM = "application/x-www-form-urlencoded"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
_VAR = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,199}")


class MissingSecret(BadInput):
    """A reference the drain cannot resolve: the effect must fail before anything is sent. (The http
    adapter maps it to the `not_sent` fate; nothing of the request was written.)"""


class SecretStore:
    """`.reel/secrets/`: one 0600 file per secret, plus the local key that names scrubbed values; and,
    when `config` names one (`secrets.backend`), the secret backend every worker shares, which is
    read first and which keeps what is stored here, if it can."""

    def __init__(self, store_dir: Path | None, config: Config | None = None) -> None:
        self.root = store_dir / SECRETS_DIR if store_dir is not None else None
        self._memory: dict[str, bytes] = {}
        """A store without a directory (an in-memory repo) keeps its secrets in memory, for its lifetime."""
        self.config = config

    def backend(self) -> SecretBackend | None:
        """The configured backend, read from the config at each use (it may change while a store is open)."""
        return None if self.config is None else configured_backend(self.config)

    def _dir(self) -> Path:
        assert self.root is not None
        self.root.mkdir(mode=0o700, exist_ok=True)
        os.chmod(self.root, 0o700)
        return self.root

    def _key(self) -> bytes:
        if self.root is None:
            return self._memory.setdefault(KEY_FILE, pysecrets.token_bytes(32))
        path = self._dir() / KEY_FILE
        if not path.is_file():
            _write_private(path, pysecrets.token_bytes(32))
        return path.read_bytes()

    def put(self, name: str, value: str) -> None:
        """Store (or replace) the secret NAME: in the backend if it takes writes, else locally."""
        _check_name(name)
        backend = self.backend()
        if backend is not None and backend.writable:
            backend.put(name, value)
            return
        if self.root is None:
            self._memory[name] = value.encode("utf-8")
            return
        _write_private(self._dir() / name, value.encode("utf-8"))

    def get(self, name: str) -> str | None:
        """The secret NAME: the backend's value, else the local one; None if neither has it."""
        _check_name(name)
        backend = self.backend()
        found = backend.get(name) if backend is not None else None
        return found if found is not None else self._local(name)

    def _local(self, name: str) -> str | None:
        if self.root is None:
            raw = self._memory.get(name)
            return None if raw is None else raw.decode("utf-8")
        try:
            return (self.root / name).read_bytes().decode("utf-8")
        except FileNotFoundError:
            return None

    def keep(self, kind: str, value: str) -> str:
        """Store a scrubbed value under a name that says nothing about it; the `store:` reference."""
        digest = hmac.new(self._key(), value.encode("utf-8"), "sha256").hexdigest()[:32]
        name = f"{kind}-{digest}"
        if self.get(name) != value:
            self.put(name, value)
        return f"store:{name}"

    def resolve(self, ref: str) -> str:
        """The value a reference stands for; MissingSecret if there is none."""
        kind, _, name = ref.partition(":")
        value = os.environ.get(name) if kind == "env" else self.get(name) if kind == "store" else None
        if value is None:
            where = f"environment variable {name}" if kind == "env" else self._where(name)
            raise MissingSecret(f"the credential this effect needs ({where}) is missing; nothing was sent")
        return value

    def _where(self, name: str) -> str:
        backend = self.backend()
        local = f"secret {name!r} in .reel/secrets"
        return local if backend is None else f"secret {name!r}, looked for in {backend.where(name)} and .reel/secrets"


def _secrets_of(repo: Any) -> SecretStore:
    return SecretStore(repo.path, repo.config)


def secret_store(repo: Any) -> SecretStore:
    """The secret store of `repo` (a `Repo`): `.reel/secrets`, or one kept in memory for an in-memory repo,
    made once per open store."""
    store: SecretStore = repo.attached(_secrets_of)
    return store


def _check_name(name: str) -> None:
    if not _NAME.fullmatch(name) or name == KEY_FILE:
        raise BadInput(f"secret name {name!r} must be letters, digits, '.', '_' or '-' (not starting with one)")


def _write_private(path: Path, data: bytes) -> None:
    atomic_write(path, data, mode=0o600)


class Names(frozenset[str]):
    """Names that count as credentials: those listed, and any matching `pattern`, less the `plain` ones.
    Only membership is meaningful (`name in names`, case-insensitive); `|` adds listed names."""

    pattern: re.Pattern[str] | None
    plain: frozenset[str]

    def __new__(cls, names: Iterable[str], pattern: re.Pattern[str] | None = None, plain: Iterable[str] = ()) -> Names:
        made = super().__new__(cls, (n.lower() for n in names))
        made.pattern = pattern
        made.plain = frozenset(p.lower() for p in plain)
        return made

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        low = name.lower()
        if frozenset.__contains__(self, low):
            return True
        return low not in self.plain and self.pattern is not None and bool(self.pattern.search(low))

    def __or__(self, other: Iterable[str]) -> Names:  # type: ignore[override]
        return Names([*self, *other], self.pattern, self.plain)


def _listed(values: Iterable[str]) -> list[str]:
    return [v.strip() for v in values if v.strip()]


def sensitive_headers(config: Config) -> Names:
    plain = {*PLAIN_BY_DEFAULT, *_listed(config.get_all("secrets.plain"))}
    return Names([*DEFAULT_HEADERS, *_listed(config.get_all("secrets.header"))], HEADER_PATTERN, plain)


def sensitive_params(config: Config) -> Names:
    """Query parameters and form fields."""
    return Names(_listed(config.get_all("secrets.param")), PARAM_PATTERN, _listed(config.get_all("secrets.plain")))


def _given_ref(value: Any) -> str | None:
    """`{"$secret": NAME}` → `store:NAME`, `{"$env": VAR}` → `env:VAR`; None for a plain value."""
    if not isinstance(value, Mapping):
        return None
    if set(value) == {"$secret"} and isinstance(value["$secret"], str):
        _check_name(value["$secret"])
        return f"store:{value['$secret']}"
    if set(value) == {"$env"} and isinstance(value["$env"], str) and _VAR.fullmatch(value["$env"]):
        return f"env:{value['$env']}"
    raise BadInput(f'a secret reference is {{"$secret": NAME}} or {{"$env": VAR}}, not {dict(value)!r}')


def named_references(op: Mapping[str, Any]) -> list[str]:
    """The credentials an http op names without giving their value: `NAME` for a stored secret, `env:VAR`
    for an environment variable, from `{"$secret"|"$env": ...}` header values and from a `secrets` map.
    (What scrubbing makes of a raw value the caller gave is not listed: the caller had the value.)"""
    named: list[str] = []
    headers = op.get("headers")
    if isinstance(headers, Mapping):
        for value in headers.values():
            ref = _given_ref(value)
            if ref is not None:
                named.append(ref)
    given = op.get("secrets")
    if isinstance(given, Mapping):
        named.extend(r for v in given.values() if isinstance(v, Mapping) for r in v.values() if isinstance(r, str))
    return [r.removeprefix("store:") for r in dict.fromkeys(named)]


def scrub_http(store: SecretStore, config: Config, op: Mapping[str, Any]) -> dict[str, Any]:
    """The op to store: sensitive values moved to the secret store, references normalized. An op that
    carries a `secrets` map already (scrubbed before) keeps its references. Only top-level values are
    replaced (new maps), so the op's nested values are shared, not copied."""
    out = dict(op)
    given = out.get("secrets") or {}
    if (
        not isinstance(given, Mapping)
        or not set(given) <= {"headers", "params", "fields"}
        or not all(
            isinstance(v, Mapping) and all(isinstance(r, str) and _valid_ref(r) for r in v.values())
            for v in given.values()
        )
    ):
        raise BadInput("http op: secrets must map headers / params / fields to store:NAME or env:VAR references")
    refs: dict[str, dict[str, str]] = {k: dict(v) for k, v in given.items()}
    heads = config.derived(sensitive_headers)
    headers = out.get("headers")
    if isinstance(headers, Mapping):
        clean: dict[str, Any] = {}
        for name, value in headers.items():
            ref = _given_ref(value)
            if ref is None and isinstance(value, str) and str(name).lower() in heads and value != SHOWN:
                ref = store.keep("h", value)
            if ref is not None:
                refs.setdefault("headers", {})[str(name)] = ref
                value = SHOWN
            elif value == SHOWN and str(name) not in refs.get("headers", {}):
                raise BadInput(f"http op: header {name} is {SHOWN} but no reference says where it is")
            clean[str(name)] = value
        out["headers"] = clean
    url = out.get("url")
    params = config.derived(sensitive_params)
    if isinstance(url, str):
        out["url"] = _scrub_query(store, url, params, refs)
    if isinstance(out.get("body"), str) and _is_form(out.get("headers")):
        out["body"] = _scrub_form(store, out["body"], params, refs)
    if refs:
        out["secrets"] = refs
    return out


def _valid_ref(ref: str) -> bool:
    kind, _, name = ref.partition(":")
    return (kind == "store" and bool(_NAME.fullmatch(name))) or (kind == "env" and bool(_VAR.fullmatch(name)))


def _scrub_query(store: SecretStore, url: str, params: frozenset[str], refs: dict[str, dict[str, str]]) -> str:
    parts = urlsplit(url)
    if not parts.query:
        return url
    return urlunsplit(parts._replace(query=_scrub_pairs(store, parts.query, params, refs, "params", "p")))


def _is_form(headers: Any) -> bool:
    return isinstance(headers, Mapping) and any(
        str(k).lower() == "content-type" and isinstance(v, str) and v.split(";")[0].strip().lower() == FORM
        for k, v in headers.items()
    )


def _scrub_form(store: SecretStore, body: str, names: frozenset[str], refs: dict[str, dict[str, str]]) -> str:
    """A urlencoded body with each sensitive field's value moved to the store (`fields` refs)."""
    return _scrub_pairs(store, body, names, refs, "fields", "f")


def _scrub_pairs(
    store: SecretStore, text: str, names: frozenset[str], refs: dict[str, dict[str, str]], where: str, tag: str
) -> str:
    """`a=1&b=2` (a query or a form body) with the value of each pair named in `names` moved to the store
    and replaced by the placeholder; the rest of the text, encoding included, as it was."""
    pieces = []
    for piece in text.split("&"):
        name, eq, value = piece.partition("=")
        pairs = parse_qsl(piece, keep_blank_values=True)
        key = pairs[0][0] if pairs else name
        if eq and key in names and value != SHOWN:
            refs.setdefault(where, {})[key] = store.keep(tag, pairs[0][1])
            piece = f"{name}={SHOWN}"
        pieces.append(piece)
    return "&".join(pieces)


def scrubbed_names(op: Mapping[str, Any]) -> list[str]:
    """What was moved out of an http op, as `header NAME`, `param NAME`, `field NAME` (for summaries)."""
    refs = op.get("secrets")
    if not isinstance(refs, Mapping):
        return []
    kinds = {"headers": "header", "params": "param", "fields": "field"}
    return [f"{kinds[k]} {n}" for k in kinds for n in sorted(refs.get(k) or {})]


def hide_params(url: str, params: frozenset[str]) -> str:
    """`url` with the values of the sensitive parameters shown as `<secret>` (for summaries and logs)."""
    if "?" not in url:
        return url
    parts = urlsplit(url)
    pieces = []
    for piece in parts.query.split("&"):
        name, eq, _ = piece.partition("=")
        pairs = parse_qsl(piece, keep_blank_values=True)
        pieces.append(f"{name}={SHOWN}" if eq and (pairs[0][0] if pairs else name) in params else piece)
    return urlunsplit(parts._replace(query="&".join(pieces)))


def resolve_http(
    store: SecretStore, op: Mapping[str, Any], url: str, headers: dict[str, str]
) -> tuple[str, dict[str, str]]:
    """The URL and headers to send, every reference resolved (MissingSecret before anything is sent)."""
    refs = thaw(op.get("secrets") or {})
    for name, ref in (refs.get("headers") or {}).items():
        headers[name] = store.resolve(ref)
    params = refs.get("params") or {}
    if params:
        parts = urlsplit(url)
        pieces = []
        for piece in parts.query.split("&"):
            name, eq, value = piece.partition("=")
            if eq and value == SHOWN and name in params:
                piece = f"{name}={quote(store.resolve(params[name]), safe='')}"
            pieces.append(piece)
        url = urlunsplit(parts._replace(query="&".join(pieces)))
    return url, headers


def resolve_body(store: SecretStore, op: Mapping[str, Any], body: bytes | None) -> bytes | None:
    """The body to send: each scrubbed form field's value put back, urlencoded (MissingSecret first)."""
    fields = thaw(op.get("secrets") or {}).get("fields") or {}
    if not fields or body is None:
        return body
    pieces = []
    for piece in body.decode("utf-8").split("&"):
        name, eq, value = piece.partition("=")
        key = (parse_qsl(piece, keep_blank_values=True) or [(name, "")])[0][0]
        if eq and value == SHOWN and key in fields:
            piece = f"{name}={quote(store.resolve(fields[key]), safe='')}"
        pieces.append(piece)
    return "&".join(pieces).encode("utf-8")


def redact(text: str, values: Iterable[str]) -> str:
    """`text` with every given secret value, and anything after a sensitive header's name, shown as
    `<secret>`: for record messages and summaries that quote the command line."""
    for v in sorted({v for v in values if len(v) >= 4}, key=len, reverse=True):
        text = text.replace(v, SHOWN)
    pattern = "|".join(re.escape(h) for h in DEFAULT_HEADERS)
    return re.sub(rf"(?i)\b({pattern})(\s*[:=]\s*)[^'\"\n]+", rf"\1\2{SHOWN}", text)


class SecretBackend(Protocol):
    """Where the secrets named by `store:NAME` references live besides `.reel/secrets`: a place every
    worker of a fleet can read, so the store that sends an effect need not be the one that captured
    it. Chosen by the config key `secrets.backend` (`env`, `file:/DIR`; unset or `local`: none).

    A backend answers `get(NAME)` with the value, or None if it has no such secret (the local store is
    asked next, then the effect is not sent, naming `where(NAME)`). One that takes writes (`writable`)
    also keeps what `put` and scrubbing store, so a value scrubbed on one machine is readable on all."""

    writable: bool

    def get(self, name: str) -> str | None:
        """The secret NAME, or None."""

    def put(self, name: str, value: str) -> None:
        """Keep `value` as the secret NAME (called only when `writable`)."""

    def where(self, name: str) -> str:
        """Where NAME was looked for, for the message of an effect that could not be sent."""


ENV_PREFIX = "REEL_SECRET_"


class EnvBackend:
    """`secrets.backend = env`: the secret NAME is the environment variable REEL_SECRET_NAME, NAME in
    capitals with `.` and `-` as `_` (so `stripe` and `Stripe` are one secret). Read-only: a value
    scrubbed here stays in `.reel/secrets`."""

    writable = False

    def get(self, name: str) -> str | None:
        return os.environ.get(env_name(name))

    def put(self, name: str, value: str) -> None:
        raise BadInput(
            f"secrets.backend = env cannot store secret {name!r}: set {env_name(name)} instead", field="secrets.backend"
        )

    def where(self, name: str) -> str:
        return f"environment variable {env_name(name)}"


def env_name(name: str) -> str:
    """The variable that holds secret `name` for the env backend."""
    return ENV_PREFIX + name.upper().replace(".", "_").replace("-", "_")


class FileBackend:
    """`secrets.backend = file:/DIR`: the secret NAME is the file DIR/NAME (a directory every worker
    mounts, or one a secret manager's agent fills). Writes are atomic, mode 0600."""

    writable = True

    def __init__(self, root: Path) -> None:
        self.root = root

    def get(self, name: str) -> str | None:
        try:
            return (self.root / name).read_bytes().decode("utf-8")
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as exc:
            raise MissingSecret(f"secret {name!r} in {self.root} cannot be read ({exc}); nothing was sent") from None

    def put(self, name: str, value: str) -> None:
        if not self.root.is_dir():
            raise BadInput(f"secrets.backend directory {self.root} does not exist", field="secrets.backend")
        _write_private(self.root / name, value.encode("utf-8"))

    def where(self, name: str) -> str:
        return f"file {self.root / name}"


def configured_backend(config: Config) -> SecretBackend | None:
    """The backend `secrets.backend` names; E014 naming the key for a value that is none of them."""
    spec = (config.get("secrets.backend") or "").strip()
    if spec in ("", "local"):
        return None
    if spec == "env":
        return EnvBackend()
    kind, _, where = spec.partition(":")
    if kind == "file" and where and Path(where).is_absolute():
        return FileBackend(Path(where))
    raise BadInput(f"secrets.backend = {spec!r} is not local, env or file:/ABSOLUTE/DIR", field="secrets.backend")
