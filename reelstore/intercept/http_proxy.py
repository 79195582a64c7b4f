"""`reel run`'s HTTP(S) proxy: safe requests pass through to the real host, unsafe ones are captured.

The command finds the proxy through `HTTP_PROXY` / `HTTPS_PROXY` (and the lower-case forms) and trusts
its certificates through the usual CA variables (`SSL_CERT_FILE`, `REQUESTS_CA_BUNDLE`, `CURL_CA_BUNDLE`,
`NODE_EXTRA_CA_CERTS`, `GIT_SSL_CAINFO`, `AWS_CA_BUNDLE`, …): each names a bundle of the system's CAs
plus the store's local CA (`reelstore.intercept.ca`). HTTPS is terminated with a leaf certificate
per host; the protocol work is h11's and `ssl`'s (`reelstore.intercept.tls_proxy`).

GET, HEAD, OPTIONS and TRACE go to the real host — over TLS verified against the system trust store
plus `http.trust` — and the answer is relayed unchanged, as it arrives. So does a request of any
method that a `read` service rule declares free of side effects (`service_rules.classify`, the one
place that decides: a model's completion, an embedding, a search); it is never queued. Loopback hosts
are reachable only when named with `--allow HOST:PORT` (the proxy runs outside the command's
sandbox, so it must not become a way into this machine's local services), except the model paths
of a local model server declared with `--model ORIGIN` (`service_rules.model_rules`), and only
those. Every other request never leaves the machine: it is admitted
into the view as an `http` effect (method, https or http URL, end-to-end headers, body; credentials
moved to the secret store at admission) and answered `202 Accepted` with a JSON body and a
`Reel-Effect: <id>` header. A request the view refuses is answered 403 with the E-code; anything that
could not be intercepted (a refused certificate, a WebSocket upgrade, a raw tunnel, a failed
pass-through) is reported as refused, so the run is not clean.

Passed-through exchanges all go through `HttpProxy.passed_through` (request, status, headers, body):
the one place a recorder hooks in. The engine is a constructor argument (`engine.EngineFactory`), so
a replayer that answers from a recording can replace the network side without touching the policy.
"""

from __future__ import annotations

import ipaddress
import json
import os
import socket
import tempfile
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from reelstore.adapters.trust import extra_trust
from reelstore.backend.repo import Repo
from reelstore.backend.secrets import hide_params, sensitive_headers, sensitive_params
from reelstore.backend.service_rules import SAFE_METHODS, Service, classify, model_origin, model_rules
from reelstore.capture import end_to_end, http_op, pending, refused
from reelstore.errors import BadInput, ReelError
from reelstore.intercept.base import Backend, Launch, Refusal
from reelstore.intercept.ca import ca_cert_path, system_bundle, write_bundle
from reelstore.intercept.engine import Answer, EngineFactory, Request, Timing
from reelstore.kernel import verbs as kernel

PROXY_VARS = ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")
BYPASS_VARS = ("NO_PROXY", "no_proxy")
CA_VARS = (
    "SSL_CERT_FILE",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS",
    "GIT_SSL_CAINFO",
    "AWS_CA_BUNDLE",
    "PIP_CERT",
    "HTTPLIB2_CA_CERTS",
    "CARGO_HTTP_CAINFO",
    "NPM_CONFIG_CAFILE",
    "DENO_CERT",
)
WGETRC_VAR = "WGETRC"
"""wget reads no CA variable; it is given a wgetrc naming the bundle (after the user's own settings)."""
INTERCEPT_FAILED = "E014"
QUERY_SECRETS = frozenset(("key", "api_key", "api-key", "access_token"))
"""Query parameters model APIs take credentials in (Gemini's `key=`): hidden wherever a passed URL is
shown or kept, besides the configured secret parameters."""


class HttpProxy(Backend):
    name = "http"
    keeps_bodies = False

    def __init__(
        self,
        repo: Repo,
        view: str,
        allow: Iterable[str] = (),
        engine: EngineFactory | None = None,
        models: Iterable[str] = (),
    ) -> None:
        super().__init__(repo, view)
        self.make_engine = engine
        """The protocol engine (default `tls_proxy.TlsProxy`); a replayer can stand in for it."""
        self.allow = {_host_port(a) for a in allow}
        self.models = list(dict.fromkeys(model_origin(m) for m in models))
        """Origins of local model servers (`--model`): their model paths are read-like and reachable."""
        self.rules: list[Service] = [r for i, m in enumerate(self.models) for r in model_rules(m, f"model{i}")]
        self.model_hosts = {
            (urlsplit(m).hostname or "", urlsplit(m).port or (443 if m.startswith("https:") else 80))
            for m in self.models
        }
        self.captured: list[dict[str, Any]] = []
        self.passed: list[dict[str, Any]] = []
        self.secret_values: set[str] = set()
        """Credentials seen in captured requests, so that summaries quoting the command can hide them."""
        self.port = 0
        self._lock = threading.Lock()
        self._over = False
        self._engine: Any = None
        self._tmp: tempfile.TemporaryDirectory[str] | None = None

    @property
    def url(self) -> str:
        assert self.port, "the proxy is not started"
        return f"http://127.0.0.1:{self.port}"

    def start(self, launch: Launch) -> None:
        from reelstore.intercept.ca import LeafMinter
        from reelstore.intercept.tls_proxy import TlsProxy

        self._tmp = tempfile.TemporaryDirectory(prefix="reel-run-ca-")
        tmp = Path(self._tmp.name)
        system = system_bundle()
        child_bundle = write_bundle(tmp / "ca-bundle.pem", system, ca_cert_path(self.repo))
        upstream = write_bundle(tmp / "upstream.pem", system, extra_trust(self.repo.config))
        os.chmod(tmp, 0o700)
        self._engine = (self.make_engine or TlsProxy)(self, LeafMinter(self.repo, tmp), upstream)
        self.port = self._engine.start()
        launch.proxy_port = self.port
        for var in PROXY_VARS:
            launch.env[var] = self.url
        for var in BYPASS_VARS:
            launch.env[var] = None
        for var in CA_VARS:
            launch.env[var] = str(child_bundle)
        launch.env[WGETRC_VAR] = str(_wgetrc(tmp / "wgetrc", child_bundle))

    def finish(self) -> None:
        """Admit nothing more: a straggler the command left running cannot add to a view already shown."""
        with self._lock:
            self._over = True
        self.close()

    def close(self) -> None:
        if self._engine is not None:
            self._engine.stop()
            self._engine = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    # The engine's Policy.

    def decide(self, req: Request) -> Answer | None:
        with self._lock:
            if self._over:
                return _json(503, {"reel": "error", "message": "the run is over; nothing was captured or sent"})
        rule = self.rule(req)
        if req.method in SAFE_METHODS or rule.read_like:
            return self.reach(req, rule)
        return self.capture(req.method, req.url, end_to_end(req.headers), req.body)

    def rule(self, req: Request) -> Service:
        """The service rule `req` falls under (the `--model` servers' rules included)."""
        return classify(self.repo.config, f"http:{req.method}:{req.url}", req.method, self.rules)

    def reach(self, req: Request, rule: Service) -> Answer | None:
        """None if `req` may go to its host; a refusal if the host is this machine and was not named with
        `--allow` (or, for a model path, `--model`)."""
        model = rule.read_like and (req.host.lower(), req.port) in self.model_hosts
        if _is_loopback(req.host) and not model and not self._allowed(req.host, req.port):
            why = (
                f"{req.host}:{req.port} is on this machine; name it with --allow {req.host}:{req.port} "
                f"(or --model for a model server) to let the command reach it. Nothing was sent"
            )
            self.failed(f"{req.method} {self.shown_url(req.url)}", why)
            return _json(403, {"reel": "refused", "message": why})
        return None

    def reaches(self, req: Request, address: str) -> bool:
        """The address the engine connected to is judged as `reach` judged the name: a local one needs
        --allow (or --model), whatever the name resolved to before."""
        model = self.rule(req).read_like and (req.host.lower(), req.port) in self.model_hosts
        if not _is_loopback(address) or model or self._allowed(req.host, req.port) and self._allowed(address, req.port):
            return True
        self.failed(
            f"{req.method} {self.shown_url(req.url)}",
            f"{req.host} resolved to {address}, on this machine, when the proxy connected; name it with "
            f"--allow to let the command reach it. Nothing was sent",
        )
        return False

    def passed_through(
        self, req: Request, status: int, headers: list[tuple[str, str]], body: bytes | None, timing: Timing
    ) -> None:
        """Every response the command got from a real host arrives here, in order."""
        params = sensitive_params(self.repo.config) | QUERY_SECRETS
        sensitive = sensitive_headers(self.repo.config)
        with self._lock:
            self.passed.append({"method": req.method, "url": self.shown_url(req.url), "status": status})
            # A credential a read carried is hidden wherever the summary quotes the command, as a captured one is.
            self.secret_values.update(v for k, v in parse_qsl(urlsplit(req.url).query) if k in params and v)
            self.secret_values.update(v for k, v in req.headers if k.lower() in sensitive and v)

    def shown_url(self, url: str) -> str:
        """`url` as summaries and recordings show it: credentials in its query hidden."""
        return hide_params(url, sensitive_params(self.repo.config) | QUERY_SECRETS)

    def failed(self, what: str, message: str) -> None:
        with self._lock:
            self.refused.append(Refusal(self.name, what, INTERCEPT_FAILED, message, BadInput.exit_status))

    def capture(self, method: str, url: str, headers: dict[str, str], body: bytes) -> Answer:
        """Admit one unsafe request into the view; the answer the command gets."""
        op = http_op(method, url, headers, body)
        sensitive = sensitive_headers(self.repo.config)
        params = sensitive_params(self.repo.config)
        what = f"{method} {hide_params(url, params)}"
        with self._lock:
            self.secret_values.update(v for k, v in headers.items() if k.lower() in sensitive)
            self.secret_values.update(v for k, v in parse_qsl(urlsplit(url).query) if k in params)
            if isinstance(op.get("body"), str) and "=" in op["body"]:
                self.secret_values.update(v for k, v in parse_qsl(op["body"]) if k in params)
            if self._over:
                return _json(503, {"reel": "error", "message": "the run is over; nothing was captured or sent"})
            try:
                made = kernel.effect(self.repo, self.view, "http", op)
            except ReelError as err:
                self.refused.append(Refusal.of(self.name, what, err))
                return _json(*refused(self.view, err))
            self.captured.append({"method": method, "url": made.resource.split(":", 2)[2], "effect": made.id.hex()})
        return _json(202, pending(self.view, made), [("Reel-Effect", made.id.hex())])

    def _allowed(self, host: str, port: int) -> bool:
        if (host.lower(), port) in self.allow:
            return True
        mine = _addresses(host)
        return any(p == port and mine & _addresses(h) for h, p in self.allow)


def _json(status: int, doc: dict[str, Any], headers: list[tuple[str, str]] | None = None) -> Answer:
    body = (json.dumps(doc, sort_keys=True) + "\n").encode("utf-8")
    return Answer(status, body, [("Content-Type", "application/json"), *(headers or [])])


def _host_port(spec: str) -> tuple[str, int]:
    host, sep, port = spec.rpartition(":")
    host = host.strip("[]").lower()
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise BadInput(f"--allow wants HOST:PORT, not {spec!r}")
    return host, int(port)


def _addresses(host: str) -> set[str]:
    """Every address `host` stands for, as the resolver (not the spelling) says: `2130706433`,
    `0x7f.1` and `[::ffff:127.0.0.1]` are all 127.0.0.1. IPv4-mapped and IPv4-compatible IPv6
    addresses are given as the IPv4 address they reach; a zone (`%eth0`) is dropped."""
    host = host.strip("[]").rstrip(".")
    try:
        found = {ipaddress.ip_address(host.split("%")[0])}
    except ValueError:
        try:
            found = {ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in socket.getaddrinfo(host, None)}
        except (OSError, UnicodeError, ValueError):
            return set()
    return {str(_unmapped(ip)) for ip in found}


def _unmapped(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return ip.ipv4_mapped
        if int(ip) >> 32 == 0 and int(ip) > 1:  # ::a.b.c.d, IPv4-compatible (:: and ::1 are themselves)
            return ipaddress.IPv4Address(int(ip))
    return ip


def _own_addresses() -> set[str]:
    """This machine's interface addresses (IPv4 by ioctl, IPv6 from /proc/net/if_inet6): a request to
    one of them reaches a local service as surely as one to 127.0.0.1."""
    import fcntl
    import struct

    own: set[str] = set()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for _, name in socket.if_nameindex():
            try:
                raw = fcntl.ioctl(s, 0x8915, struct.pack("256s", name.encode()[:15]))  # SIOCGIFADDR
            except OSError:
                continue
            own.add(socket.inet_ntoa(raw[20:24]))
    try:
        lines = Path("/proc/net/if_inet6").read_text().splitlines()
    except OSError:
        lines = []
    for line in lines:
        hexaddr = line.split()[0]
        own.add(str(ipaddress.IPv6Address(bytes.fromhex(hexaddr))))
    return own


def _is_loopback(host: str) -> bool:
    """The host is this machine: a name under `localhost`, or any address it resolves to is loopback,
    unspecified, link-local, or one of this machine's own interface addresses (IPv4-mapped and
    IPv4-compatible forms included). Such a host is reachable only when named with --allow."""
    name = host.strip("[]").rstrip(".").lower()
    if name == "localhost" or name.endswith(".localhost"):
        return True
    ips = [ipaddress.ip_address(a) for a in _addresses(host)]
    if any(ip.is_loopback or ip.is_unspecified or ip.is_link_local for ip in ips):
        return True
    return bool({str(ip) for ip in ips} & _own_addresses())


def _wgetrc(path: Path, bundle: Path) -> Path:
    """A wgetrc: the user's own (WGETRC or ~/.wgetrc), then the CA bundle."""
    own = os.environ.get(WGETRC_VAR) or str(Path.home() / ".wgetrc")
    text = Path(own).read_text(errors="replace") if Path(own).is_file() else ""
    path.write_text(f"{text}\nca_certificate = {bundle}\n")
    return path
