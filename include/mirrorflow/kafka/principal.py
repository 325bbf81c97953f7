"""The Kafka principal a client's settings log in as, where the settings alone can tell.

SCRAM and PLAIN logins name their user (``sasl.username``); a client
certificate's principal is what the broker's ``ssl.principal.mapping.rules``
make of its subject, and Kafka's default rule keeps the whole distinguished name
(``User:CN=mirrorflow``). Kerberos, OAuth and brokers with their own mapping rules
cannot be told from the client side: ``None``.

Used by error messages that name who was refused, and by the ACL tool.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def principal_of(settings: Mapping[str, Any]) -> str | None:
    """``User:<name>`` for librdkafka settings whose login names its user, else ``None``."""
    protocol = str(settings.get("security.protocol") or "PLAINTEXT").upper()
    if protocol.startswith("SASL"):
        mechanism = str(settings.get("sasl.mechanism") or settings.get("sasl.mechanisms") or "GSSAPI").upper()
        user = settings.get("sasl.username")
        if mechanism in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512") and user:
            return f"User:{user}"
        return None
    if protocol == "SSL" and settings.get("ssl.certificate.pem"):
        try:
            from cryptography import x509

            cert = x509.load_pem_x509_certificate(str(settings["ssl.certificate.pem"]).encode())
        except Exception:  # noqa: BLE001 - an unreadable certificate: the principal is unknown
            return None
        return f"User:{cert.subject.rfc4514_string()}"
    if protocol == "PLAINTEXT":
        return "User:ANONYMOUS"
    return None
