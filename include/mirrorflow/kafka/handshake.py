"""Why a client could not get in: wrong password, untrusted certificate, wrong protocol, said at once.

librdkafka retries a refused login or a failed TLS handshake until the request's
timeout, then reports a bare "broker transport failure": a minute of waiting
that says nothing. Its error callback does see the cause at the first attempt,
so the probe that starts every plan watches it (:class:`HandshakeWatch`) and
stops on the first error that retrying cannot fix, with a sentence that names
the cause and the setting to look at. A plaintext client at a TLS port gets no
such callback (librdkafka only logs it), so :func:`speaks_tls` asks the port
itself.

Nothing here echoes a setting's value: the sentences name keys, never secrets.
"""

from __future__ import annotations

import datetime as dt
import socket
import ssl
import threading
from collections.abc import Mapping
from typing import Any

from confluent_kafka import KafkaError

_TLS_PROTOCOLS = {"SSL", "SASL_SSL"}
_SASL_PROTOCOLS = {"SASL_PLAINTEXT", "SASL_SSL"}


class HandshakeWatch:
    """An ``error_cb`` that keeps the first error retrying cannot fix, as a sentence."""

    def __init__(self, settings: Mapping[str, Any]) -> None:
        self.settings = settings
        self.reason: str | None = None
        #: Every broker is down for the client: the moment to ask whether it speaks the wrong protocol.
        self.all_down = False
        self._lock = threading.Lock()

    def __call__(self, error: KafkaError) -> None:
        if error.code() == KafkaError._ALL_BROKERS_DOWN:
            self.all_down = True
        reason = classify(error, self.settings)
        if reason is not None:
            with self._lock:
                if self.reason is None:
                    self.reason = reason


def classify(error: KafkaError, settings: Mapping[str, Any]) -> str | None:
    """A sentence for an authentication or TLS failure; ``None`` for anything a retry may cure."""
    code, text = error.code(), error.str()
    lowered = text.lower()
    if code == KafkaError._AUTHENTICATION:
        mechanism = settings.get("sasl.mechanism") or settings.get("sasl.mechanisms") or "GSSAPI"
        user = settings.get("sasl.username")
        who = f"user {user!r}" if user else "the configured identity"
        return (f"authentication failed: the broker refused {who} with SASL mechanism {mechanism} "
                f"(wrong sasl.username or sasl.password, or the user does not exist for that mechanism)")
    if "certificate verify failed" in lowered:
        return ("TLS: the broker's certificate is not trusted: it is not signed by the CA in ssl.ca.pem / "
                "ssl.ca.location (or its name does not match the bootstrap address)")
    if "alert certificate unknown" in lowered or "alert bad certificate" in lowered \
            or "certificate expired" in lowered or "alert certificate required" in lowered:
        return f"TLS: the broker refused this client's certificate ({_client_certificate_state(settings)})"
    if "connecting to a plaintext broker listener" in lowered:
        return (f"TLS: security.protocol is {settings.get('security.protocol')} but the port at "
                f"{settings.get('bootstrap.servers')} does not speak TLS (a PLAINTEXT or SASL_PLAINTEXT listener?)")
    if code == KafkaError._SSL:
        return f"TLS handshake failed: {text}"
    return None


def _client_certificate_state(settings: Mapping[str, Any]) -> str:
    """What is wrong with the client certificate, as far as this side can tell without its key."""
    pem = settings.get("ssl.certificate.pem")
    if not pem and not settings.get("ssl.certificate.location") and not settings.get("ssl.keystore.location"):
        return "no client certificate is configured (ssl.certificate.pem / ssl.certificate.location), " \
               "and this listener requires one"
    if pem:
        try:
            from cryptography import x509

            cert = x509.load_pem_x509_certificate(str(pem).encode())
            now = dt.datetime.now(dt.UTC)
            if cert.not_valid_after_utc < now:
                return f"ssl.certificate.pem expired on {cert.not_valid_after_utc:%Y-%m-%d %H:%M} UTC"
            if cert.not_valid_before_utc > now:
                return f"ssl.certificate.pem is not valid before {cert.not_valid_before_utc:%Y-%m-%d %H:%M} UTC"
            return (f"ssl.certificate.pem ({cert.subject.rfc4514_string()}, issued by "
                    f"{cert.issuer.rfc4514_string()}) is not signed by a CA the broker trusts")
        except Exception:  # noqa: BLE001 - a certificate we cannot read: say what we know
            return "ssl.certificate.pem could not be read as a PEM certificate"
    return "the configured client certificate is untrusted or expired"


def plaintext_at_tls_port(settings: Mapping[str, Any], timeout: float = 3.0) -> str | None:
    """A sentence when a non-TLS client points at a port that speaks TLS, else ``None``."""
    protocol = str(settings.get("security.protocol") or "PLAINTEXT").upper()
    if protocol in _TLS_PROTOCOLS:
        return None
    first = str(settings.get("bootstrap.servers") or "").split(",")[0].strip()
    host, _, port = first.rpartition(":")
    if not host or not port.isdigit():
        return None
    if speaks_tls(host.strip("[]"), int(port), timeout):
        wanted = "SASL_SSL" if protocol in _SASL_PROTOCOLS else "SSL or SASL_SSL"
        return (f"security.protocol is {protocol} but {first} speaks TLS: set security.protocol to {wanted} "
                f"and the CA (ssl.ca.pem)")
    return None


def speaks_tls(host: str, port: int, timeout: float = 3.0) -> bool:
    """Whether the server at ``host:port`` answers a TLS hello (a Kafka PLAINTEXT listener just hangs up)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with socket.create_connection((host, port), timeout=timeout) as raw, \
                context.wrap_socket(raw, server_hostname=host) as tls:
            return tls.version() is not None
    except ssl.SSLError as exc:
        # An alert (the server wants a client certificate, say) still came from a TLS server;
        # an EOF or reset mid-hello is a plaintext listener hanging up.
        return not isinstance(exc, ssl.SSLEOFError) and "alert" in str(exc).lower()
    except OSError:
        return False
