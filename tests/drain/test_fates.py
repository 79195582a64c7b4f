"""Every effect's fate, decided by evidence, against real loopback targets, for every delivery tier:
nothing listening and an untrusted certificate are `not_sent` (and `reel recover` sends them again,
whatever the tier); a 4xx is `failed` (final); a dropped connection or a 5xx is `unknown` (recover
decides by tier, and a blind one stays unknown). A name that cannot resolve runs in a network
namespace of its own, so no lookup leaves the machine."""

from __future__ import annotations

import datetime
import ipaddress
import json
import os
import shutil
import ssl
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import HELPERS, REEL
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from target import ROUTES, TIERS, Target, configure, pay_op

from reelstore.api import Store
from reelstore.drain import journal as drainlog
from reelstore.drain import ops, recovery
from reelstore.errors import EffectFailed, OutcomeUnknown


def states(store: Store) -> list[str]:
    """The journal's states, oldest first."""
    head = store.repo.refs.get("refs/drains/main")
    return [e.state for e in reversed(list(drainlog.walk(store.repo, head)))]


def queue(store: Store, base: str, tier: str, name: str = "v"):  # noqa: ANN201
    v = store.fork(name)
    v.effect("http", pay_op(base, tier))
    return v


def acted(target: Target, tier: str) -> int:
    return target.count(ROUTES[tier])


@pytest.mark.parametrize("tier", TIERS)
def test_nothing_listening_is_not_sent_and_recover_sends_it_whatever_the_tier(
    tmp_path: Path, tier: str, reserve_port: Callable[[], int]
) -> None:
    port = reserve_port()
    base = f"http://127.0.0.1:{port}"
    store = Store.init(tmp_path / "s")
    configure(store.repo.config, base)
    v = queue(store, base, tier)
    with pytest.raises(EffectFailed) as err:
        v.commit()
    (o,) = err.value.result.drain.outcomes
    assert (o.state, o.action) == ("not_sent", "tried")
    assert "could not connect to 127.0.0.1" in o.note and "Connection refused" in o.note
    assert "no byte of the request left" in o.note
    assert err.value.ops == [o.op] and "reel recover" in err.value.next_action
    assert err.value.code == "E017" and err.value.exit_status == 9
    assert states(store) == ["unknown", "not_sent"]
    assert [x.state for x in ops.list_ops(store.repo, unresolved=True)] == ["not_sent"]
    with Target(tmp_path / "ledger", port) as target:
        rep = recovery.recover(store.repo)
        rep.check()
        (again,) = rep.drains[0].outcomes
        assert (again.state, again.action) == ("succeeded", "resent")
        assert acted(target, tier) == 1
        assert recovery.recover(store.repo).drains == [] and acted(target, tier) == 1


def _self_signed(tmp_path: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "reel test target")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path


@pytest.mark.parametrize("tier", TIERS)
def test_an_untrusted_certificate_is_not_sent_until_it_is_trusted(tmp_path: Path, tier: str) -> None:
    cert, key = _self_signed(tmp_path)
    with Target(tmp_path / "ledger") as target:
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls.load_cert_chain(cert, key)
        target.server.socket = tls.wrap_socket(target.server.socket, server_side=True)
        base = f"https://127.0.0.1:{target.server.server_address[1]}"
        store = Store.init(tmp_path / "s")
        configure(store.repo.config, base)
        v = queue(store, base, tier)
        with pytest.raises(EffectFailed) as err:
            v.commit()
        (o,) = err.value.result.drain.outcomes
        assert o.state == "not_sent" and "TLS handshake" in o.note and "certificate verify failed" in o.note
        with pytest.raises(EffectFailed):
            recovery.recover(store.repo).check()
        assert target.requests == 0 and target.ledger() == []
        store.repo.config.set("http.trust", str(cert))
        rep = recovery.recover(store.repo)
        rep.check()
        assert [x.state for x in rep.drains[0].outcomes] == ["succeeded"] and acted(target, tier) == 1


RECOVERED_AFTER_A_DROP = {"keyed": "succeeded", "queryable": "succeeded", "two-phase": "succeeded", "blind": "unknown"}


@pytest.mark.parametrize("tier", TIERS)
def test_a_request_read_then_dropped_is_unknown_and_recover_decides_by_tier(tmp_path: Path, tier: str) -> None:
    with Target(tmp_path / "ledger") as target:
        store = Store.init(tmp_path / "s")
        configure(store.repo.config, target.url)
        v = queue(store, target.url, tier)
        target.fault = "drop-after-append"
        with pytest.raises(OutcomeUnknown) as err:
            v.commit()
        (o,) = err.value.result.drain.outcomes
        assert (o.state, o.action) == ("unknown", "sent") and "no answer came back" in o.note
        assert err.value.ops == [o.op] and err.value.exit_status == 7
        assert acted(target, tier) == 1
        target.fault = None
        rep = recovery.recover(store.repo)
        assert [x.state for x in rep.drains[0].outcomes] == [RECOVERED_AFTER_A_DROP[tier]]
        if tier == "blind":
            with pytest.raises(OutcomeUnknown):
                rep.check()
        else:
            rep.check()
        assert acted(target, tier) == 1


@pytest.mark.parametrize("tier", TIERS)
def test_a_4xx_is_failed_for_every_tier_and_nothing_resends_it(tmp_path: Path, tier: str) -> None:
    with Target(tmp_path / "ledger") as target:
        store = Store.init(tmp_path / "s")
        configure(store.repo.config, target.url)
        v = queue(store, target.url, tier)
        target.fault = "refuse"
        with pytest.raises(EffectFailed) as err:
            v.commit()
        (o,) = err.value.result.drain.outcomes
        assert o.state == "failed" and o.note.startswith("HTTP 422: the target refused")
        assert "final" in err.value.next_action
        target.fault = None
        seen = target.requests
        assert recovery.recover(store.repo).drains == []
        assert target.requests == seen and target.ledger() == []
        assert [x.state for x in ops.list_ops(store.repo)] == ["failed"]


RECOVERED_AFTER_A_5XX = {
    "keyed": ("succeeded", 1),
    "queryable": ("succeeded", 1),
    "two-phase": ("succeeded", 1),
    "blind": ("unknown", 0),
}


@pytest.mark.parametrize("tier", TIERS)
def test_a_5xx_is_unknown_and_recover_decides_by_tier(tmp_path: Path, tier: str) -> None:
    with Target(tmp_path / "ledger") as target:
        store = Store.init(tmp_path / "s")
        configure(store.repo.config, target.url)
        v = queue(store, target.url, tier)
        target.fault = "error-before-append"
        res = v.commit(check=False)
        (o,) = res.drain.outcomes
        assert o.state == "unknown" and "HTTP 500" in o.note and "does not say whether" in o.note
        target.fault = None
        rep = recovery.recover(store.repo)
        assert ([x.state for x in rep.drains[0].outcomes][0], acted(target, tier)) == RECOVERED_AFTER_A_5XX[tier]


def test_the_command_line_exits_by_fate(tmp_path: Path, reel, reserve_port: Callable[[], int]) -> None:  # noqa: ANN001
    port = reserve_port()
    base = f"http://127.0.0.1:{port}"
    assert reel("init", "s").returncode == 0
    cwd = tmp_path / "s"
    assert reel("fork", "a", cwd=cwd).returncode == 0
    for tier in ("blind", "keyed"):
        assert reel("effect", "a", "--adapter", "http", "--op", json.dumps(pay_op(base, tier)), cwd=cwd).returncode == 0
    done = reel("commit", "a", cwd=cwd)
    assert done.returncode == 9, done.stderr
    out, err = done.stdout.decode(), done.stderr.decode()
    assert ": not_sent (tried) - not sent: could not connect to" in out and ": pending (not-reached)" in out
    assert err.startswith("error: E017: committed as record ")
    assert "; 2 effects owed (the commit stands; do not queue the owed ones again): operation op_" in err
    assert "operation op_" in err and "reel recover" in err
    again = reel("recover", cwd=cwd)
    assert again.returncode == 9 and "E017" in again.stderr.decode()
    with Target(tmp_path / "ledger", port) as target:
        done = reel("recover", cwd=cwd)
        assert done.returncode == 0, done.stderr
        assert target.count("/blind") == 1 and target.count("/keyed") == 1
        assert reel("fork", "b", cwd=cwd).returncode == 0
        assert (
            reel(
                "effect", "b", "--adapter", "http", "--op", json.dumps(pay_op(target.url, "blind")), cwd=cwd
            ).returncode
            == 0
        )
        target.fault = "drop-after-append"
        lost = reel("--json", "commit", "b", cwd=cwd)
        assert lost.returncode == 7 and json.loads(lost.stderr)["error"]["code"] == "E011"
        assert json.loads(lost.stdout)["drain"]["outcomes"][0]["state"] == "unknown"


DNS_SCRIPT = textwrap.dedent("""
    import json, sys
    from reelstore.api import Store
    from reelstore.drain import recovery
    sys.path.insert(0, sys.argv[2])
    from target import TIERS, configure, pay_op

    base = "http://no-such-host.invalid"
    out = {}
    for tier in TIERS:
        store = Store.init(f"{sys.argv[1]}/{tier}")
        configure(store.repo.config, base)
        v = store.fork("v")
        v.effect("http", pay_op(base, tier))
        first = v.commit(check=False).drain.outcomes[0]
        again = recovery.recover(store.repo).drains[0].outcomes[0]
        out[tier] = [first.state, first.note, again.state, again.action]
    print(json.dumps(out))
""")


def _isolated() -> list[str]:
    """A prefix that runs a command in a new user and network namespace: no route off the machine."""
    unshare = shutil.which("unshare")
    assert unshare, "util-linux unshare is needed to resolve names with no network"
    return [unshare, "-rn"]


def test_a_name_that_does_not_resolve_is_not_sent_for_every_tier(tmp_path: Path) -> None:
    proc = subprocess.run(
        [*_isolated(), sys.executable, "-c", DNS_SCRIPT, str(tmp_path), str(HELPERS)], capture_output=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr.decode()
    found = json.loads(proc.stdout)
    for tier in TIERS:
        state, note, again, action = found[tier]
        assert state == "not_sent" and "name resolution failed for 'no-such-host.invalid'" in note, (tier, note)
        assert (again, action) == ("not_sent", "retried"), tier


def test_the_command_line_says_a_name_did_not_resolve(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "REEL_DIR"}

    def reel(*args: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run([*_isolated(), REEL, *args], capture_output=True, cwd=tmp_path, env=env, timeout=120)

    assert reel("init").returncode == 0 and reel("fork", "a").returncode == 0
    op = {"method": "POST", "url": "http://no-such-host.invalid/hook", "json": {"n": 1}}
    assert reel("effect", "a", "--adapter", "http", "--op", json.dumps(op)).returncode == 0
    done = reel("commit", "a")
    assert done.returncode == 9 and b"error: E017:" in done.stderr
    assert b"not_sent (tried) - not sent: name resolution failed for 'no-such-host.invalid'" in done.stdout
    assert b"unknown" not in done.stdout


def test_the_python_api_raises_per_fate_unless_check_is_false(tmp_path: Path) -> None:
    import reelstore

    assert issubclass(reelstore.EffectFailed, reelstore.ReelError)
    assert issubclass(reelstore.OutcomeUnknown, reelstore.ReelError)
    with Target(tmp_path / "ledger") as target:
        store = Store.init(tmp_path / "s")
        configure(store.repo.config, target.url)
        with store.view("ok") as v:
            v.effect("http", pay_op(target.url, "keyed"))
        assert [o.state for o in v.result.drain.outcomes] == ["succeeded"]
        target.fault = "refuse"
        head = store.repo.refs["refs/heads/main"]
        with pytest.raises(reelstore.EffectFailed) as failed:
            with store.view("refused") as w:
                w.effect("http", pay_op(target.url, "keyed"))
        assert failed.value.result is w.result and not w.live
        assert store.repo.refs["refs/heads/main"] != head, "the commit stands; only its effect failed"
        target.fault = "drop-after-append"
        with store.view("lost", check=False) as x:
            x.effect("http", pay_op(target.url, "blind"))
        assert x.result.drain.halted.state == "unknown"
        store.fork("again").effect("http", pay_op(target.url, "blind"))
        with pytest.raises(reelstore.OutcomeUnknown) as unknown:
            store.commit("again")
        assert unknown.value.ops == [unknown.value.result.drain.outcomes[0].op]
        assert unknown.value.next_action.startswith("reel ops show op_")
        assert unknown.value.to_json()["details"]["ops"] == unknown.value.ops


def test_a_not_sent_operation_can_be_given_up_but_never_declared_succeeded(
    tmp_path: Path, reserve_port: Callable[[], int]
) -> None:
    from reelstore.errors import BadInput

    base = f"http://127.0.0.1:{reserve_port()}"
    store = Store.init(tmp_path / "s")
    v = queue(store, base, "blind")
    v.effect("http", pay_op(base, "blind", 6))
    op = v.commit(check=False).drain.outcomes[0].op
    with pytest.raises(BadInput, match="cannot have succeeded"):
        ops.reconcile(store.repo, op, "succeeded", "looked", "alice")
    ops.reconcile(store.repo, op, "absent", "the hook is gone for good", "alice")
    rep = recovery.recover(store.repo)
    assert [o.state for o in rep.drains[0].outcomes] == ["absent", "not_sent"]
    with pytest.raises(EffectFailed) as err:
        rep.check()
    assert len(err.value.ops) == 2
