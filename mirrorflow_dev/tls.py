"""A throwaway certificate authority for the secured local clusters: made on this machine, never downloaded.

Secured clusters (``mirrorflow_dev.kafka`` with ``secured=True``) need a CA the
brokers and clients trust, a certificate per broker (its TLS listeners and the
broker's own connections to itself) and client certificates whose common name
becomes the Kafka principal (``CN=mirrorflow`` is ``User:mirrorflow``, by the
brokers' ``ssl.principal.mapping.rules``). Everything is PEM, because that is
what librdkafka takes inline (``ssl.ca.pem``, ``ssl.certificate.pem``,
``ssl.key.pem``) and what Kafka's PEM key stores read, so no JKS file and no
keystore password exist anywhere.

Tests also need certificates that must be refused: one signed by another CA
(untrusted) and one whose validity ended yesterday (expired).
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_DAY = dt.timedelta(days=1)


@dataclass(frozen=True)
class Issued:
    """A certificate and its key, both PEM text (the key unencrypted PKCS#8)."""

    certificate: str
    key: str

    def keystore_pem(self, chain: str = "") -> str:
        """Key then certificate chain in one text: the layout of a Kafka ``PEM`` key store file."""
        return self.key + self.certificate + chain


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> str:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


class CertificateAuthority:
    """A self-signed CA kept in ``directory`` (``ca.pem``, ``ca.key``): made once, reused on later opens."""

    def __init__(self, directory: Path, name: str = "mirrorflow-local-ca") -> None:
        self.directory = Path(directory)
        cert_path, key_path = self.directory / "ca.pem", self.directory / "ca.key"
        if cert_path.exists() and key_path.exists():
            self._cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
            loaded = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
            assert isinstance(loaded, ec.EllipticCurvePrivateKey)
            self._key = loaded
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        self._key = _key()
        now = dt.datetime.now(dt.UTC)
        self._cert = (
            x509.CertificateBuilder()
            .subject_name(_name(name)).issuer_name(_name(name))
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - _DAY).not_valid_after(now + 3650 * _DAY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False,
                                         encipher_only=False, decipher_only=False), critical=True)
            .sign(self._key, hashes.SHA256())
        )
        write_private(key_path, _key_pem(self._key))
        cert_path.write_text(self.pem)

    @property
    def pem(self) -> str:
        return self._cert.public_bytes(serialization.Encoding.PEM).decode()

    @property
    def path(self) -> Path:
        return self.directory / "ca.pem"

    def issue(self, common_name: str, *, expired: bool = False) -> Issued:
        """A certificate for ``common_name``, good for a TLS server on loopback and as a TLS client."""
        key = _key()
        now = dt.datetime.now(dt.UTC)
        start, end = (now - 30 * _DAY, now - _DAY) if expired else (now - _DAY, now + 825 * _DAY)
        cert = (
            x509.CertificateBuilder()
            .subject_name(_name(common_name)).issuer_name(self._cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start).not_valid_after(end)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.SubjectAlternativeName([
                x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                                  ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
            .sign(self._key, hashes.SHA256())
        )
        return Issued(cert.public_bytes(serialization.Encoding.PEM).decode(), _key_pem(key))

    def write_keystore(self, common_name: str, path: Path) -> Path:
        """A broker's key store: its key and certificate then the CA's, in one private PEM file."""
        issued = self.issue(common_name)
        write_private(path, issued.keystore_pem(self.pem))
        return path


def write_private(path: Path, text: str) -> None:
    """Write ``text`` readable by its owner only (created so, never world-readable for an instant)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(text)
