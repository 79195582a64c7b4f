"""The store's local certificate authority for `reel run`'s TLS interception, the leaf certificates
it signs per host, and the CA bundles built from it.

The CA lives in `.reel/ca/` (mode 0700; `ca-key.pem` 0600, `ca-cert.pem` 0644), beside the object
store and never inside it: no sync path reads `.reel/ca`, so the key never leaves the machine. It is
made on first use. Leaf certificates are minted in memory for each host the command connects to and
handed to the TLS layer through a private temporary directory; they live for the run only.

Pass-through requests are verified against the system trust store plus `http.trust`
(`reelstore.adapters.trust`), the same trust the drain sends with.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import ssl
import threading
from pathlib import Path
from typing import Any

from reelstore.backend.fileio import atomic_write
from reelstore.backend.repo import Repo

CA_DIR = "ca"
CA_KEY = "ca-key.pem"
CA_CERT = "ca-cert.pem"
CA_DAYS = 3650
LEAF_DAYS = 30
FALLBACK_BUNDLES = (
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/cert.pem",
    "/etc/ssl/ca-bundle.pem",
)


def ca_dir(repo: Repo) -> Path:
    assert repo.path is not None, "a local CA needs a store on disk"
    return repo.path / CA_DIR


def ca_cert_path(repo: Repo) -> Path:
    """The CA certificate (public), made with its key on first use."""
    d = ca_dir(repo)
    if not (d / CA_KEY).is_file() or not (d / CA_CERT).is_file():
        _create(d)
    return d / CA_CERT


def _create(d: Path) -> None:
    """A fresh CA (an EC P-256 key, self-signed, ten years). `cryptography` is imported here, not at
    module level: only `reel run` pays for it."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    d.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(d, 0o700)
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "reelstore"),
            x509.NameAttribute(NameOID.COMMON_NAME, "reelstore local CA (reel run)"),
        ]
    )
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=CA_DAYS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    atomic_write(
        d / CA_KEY,
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()),
        mode=0o600,
    )
    atomic_write(d / CA_CERT, cert.public_bytes(serialization.Encoding.PEM), mode=0o644)


class LeafMinter:
    """Server-side TLS contexts for any host, each with a leaf certificate the local CA signs."""

    def __init__(self, repo: Repo, workdir: Path) -> None:
        from cryptography import x509
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ec

        d = ca_dir(repo)
        ca_cert_path(repo)
        loaded = serialization.load_pem_private_key((d / CA_KEY).read_bytes(), None)
        assert isinstance(loaded, ec.EllipticCurvePrivateKey), "the local CA key is not an EC key"
        self._ca_key: Any = loaded
        self._ca_cert: Any = x509.load_pem_x509_certificate((d / CA_CERT).read_bytes())
        self._leaf_key: Any = ec.generate_private_key(ec.SECP256R1())
        self._dir = workdir
        self._lock = threading.Lock()
        self._contexts: dict[str, ssl.SSLContext] = {}
        key_path = workdir / "leaf-key.pem"
        atomic_write(
            key_path,
            self._leaf_key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            ),
            fsync=False,
            mode=0o600,
        )
        self._key_path = key_path

    def context(self, host: str) -> ssl.SSLContext:
        """A TLS server context presenting a certificate for `host` (a name or an IP address)."""
        host = host.strip("[]").lower()
        with self._lock:
            ctx = self._contexts.get(host)
            if ctx is None:
                ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
                ctx.minimum_version = ssl.TLSVersion.TLSv1_2
                ctx.set_alpn_protocols(["http/1.1"])
                cert = self._dir / f"leaf-{len(self._contexts)}.pem"
                atomic_write(cert, self._sign_leaf(host), fsync=False, mode=0o600)
                ctx.load_cert_chain(cert, self._key_path)
                self._contexts[host] = ctx
            return ctx

    def _sign_leaf(self, host: str) -> bytes:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

        try:
            alt: Any = x509.IPAddress(ipaddress.ip_address(host))
        except ValueError:
            alt = x509.DNSName(host)
        now = datetime.datetime.now(datetime.timezone.utc)
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host[:64])]))
            .issuer_name(self._ca_cert.subject)
            .public_key(self._leaf_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=LEAF_DAYS))
            .add_extension(x509.SubjectAlternativeName([alt]), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self._ca_key.public_key()), critical=False
            )
            .sign(self._ca_key, hashes.SHA256())
        )
        return cert.public_bytes(serialization.Encoding.PEM)


def system_bundle() -> Path | None:
    """The system's CA bundle file (the trust store `ssl` uses by default), if there is one."""
    paths = ssl.get_default_verify_paths()
    for cand in (paths.cafile, paths.openssl_cafile, *FALLBACK_BUNDLES):
        if cand and Path(cand).is_file():
            return Path(cand)
    return None


def write_bundle(dest: Path, *parts: Path | None) -> Path:
    """Concatenate PEM files into `dest` (the system bundle plus our CA, or plus the extra trust)."""
    chunks = [p.read_bytes().rstrip(b"\n") + b"\n" for p in parts if p is not None]
    dest.write_bytes(b"".join(chunks))
    return dest
