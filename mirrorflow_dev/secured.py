"""What makes a local cluster a secured one: TLS listeners, SCRAM, the standard authorizer, and its users.

A secured cluster (``LocalKafka(..., secured=True)``) listens on

- ``SASL_SSL`` (its ``port``): SCRAM-SHA-512 over TLS, the usual production setting;
- ``SSL`` (its ``ssl_port``): mutual TLS, a client certificate is required and its
  subject is the principal (Kafka's default mapping: ``User:CN=mirrorflow``). The
  broker's own connections to itself (transaction markers) use it too, with the
  broker's certificate;
- ``CONTROLLER``: TLS with the broker's certificate.

The standard KRaft authorizer refuses whatever no ACL allows
(``allow.everyone.if.no.acl.found=false``); the broker's and the harness's
certificates are super users (``User:CN=broker``, ``User:CN=admin``). The
harness acts as ``admin`` through its certificate, so no set-up password exists:
SCRAM users are created afterwards through the admin API
(``AlterUserScramCredentials``), which keeps every password out of process
arguments (``kafka-storage format --add-scram`` would put it there; it is needed
only when brokers talk to each other over SCRAM, and these do not).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mirrorflow_dev.tls import CertificateAuthority, Issued, write_private

_pause = threading.Event()  # never set: .wait(t) paces polling

BROKER_PRINCIPAL = "broker"
ADMIN_PRINCIPAL = "admin"
SCRAM_MECHANISM = "SCRAM-SHA-512"


@dataclass(frozen=True)
class SecuredListeners:
    """The TLS listener's port and where the cluster set's CA lives."""

    ssl_port: int
    pki_dir: Path

    def authority(self) -> CertificateAuthority:
        return CertificateAuthority(self.pki_dir)

    def broker_properties(self, sasl_port: int, controller_port: int, keystore: Path) -> dict[str, str]:
        from mirrorflow_dev.process import HOST

        ca = self.authority().path
        return {
            "listeners": f"SASL_SSL://{HOST}:{sasl_port},SSL://{HOST}:{self.ssl_port},"
                         f"CONTROLLER://{HOST}:{controller_port}",
            "advertised.listeners": f"SASL_SSL://{HOST}:{sasl_port},SSL://{HOST}:{self.ssl_port}",
            "inter.broker.listener.name": "SSL",
            "listener.security.protocol.map": "SASL_SSL:SASL_SSL,SSL:SSL,CONTROLLER:SSL",
            "sasl.enabled.mechanisms": SCRAM_MECHANISM,
            # The server side of SCRAM needs no credentials of its own (brokers do not log in over it).
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config":
                "org.apache.kafka.common.security.scram.ScramLoginModule required;",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(keystore),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(ca),
            "listener.name.sasl_ssl.ssl.client.auth": "none",
            "listener.name.ssl.ssl.client.auth": "required",
            "listener.name.controller.ssl.client.auth": "required",
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            # Kafka's default principal of a certificate is its whole subject: CN=<name> here.
            "super.users": f"User:CN={BROKER_PRINCIPAL};User:CN={ADMIN_PRINCIPAL}",
            "allow.everyone.if.no.acl.found": "false",
        }

    def client_certificate(self, principal: str) -> Issued:
        """The certificate of ``principal`` (made once per cluster set and kept, private, beside the CA)."""
        cert_path, key_path = self.pki_dir / f"{principal}.pem", self.pki_dir / f"{principal}.key"
        if not (cert_path.exists() and key_path.exists()):
            issued = self.authority().issue(principal)
            write_private(key_path, issued.key)
            cert_path.write_text(issued.certificate)
        return Issued(cert_path.read_text(), key_path.read_text())

    def admin_config(self, ssl_bootstrap: str) -> dict[str, Any]:
        """The harness's super user: mutual TLS with the ``admin`` certificate."""
        return mtls_config(ssl_bootstrap, self.authority().pem, self.client_certificate(ADMIN_PRINCIPAL))


def mtls_config(bootstrap: str, ca_pem: str, issued: Issued) -> dict[str, Any]:
    """librdkafka settings for mutual TLS, every certificate and key inline (no file on any executor)."""
    return {"bootstrap.servers": bootstrap, "security.protocol": "SSL", "ssl.ca.pem": ca_pem,
            "ssl.certificate.pem": issued.certificate, "ssl.key.pem": issued.key}


def scram_config(bootstrap: str, ca_pem: str, user: str, password: str) -> dict[str, Any]:
    """librdkafka settings for SCRAM-SHA-512 over TLS, the CA inline."""
    return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_SSL", "sasl.mechanism": SCRAM_MECHANISM,
            "sasl.username": user, "sasl.password": password, "ssl.ca.pem": ca_pem}


def upsert_scram_user(admin_config: Mapping[str, Any], user: str, password: str, timeout: float = 30.0) -> None:
    """Create (or change the password of) a SCRAM-SHA-512 user through the admin API."""
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient(dict(admin_config))
    upsert = UserScramCredentialUpsertion(user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
                                          password.encode())
    for future in admin.alter_user_scram_credentials([upsert], request_timeout=timeout).values():
        future.result()


def create_acls(admin_config: Mapping[str, Any], bindings: Iterable[Any], timeout: float = 30.0) -> None:
    """Add ACL bindings (``confluent_kafka.admin.AclBinding``) and wait until the broker took them."""
    from confluent_kafka.admin import AdminClient

    bindings = list(bindings)
    if not bindings:
        return
    admin = AdminClient(dict(admin_config))
    for future in admin.create_acls(bindings, request_timeout=timeout).values():
        future.result()
    _until_applied(admin, [_filter_of(b) for b in bindings], True, timeout)


def delete_acls(admin_config: Mapping[str, Any], filters: Iterable[Any], timeout: float = 30.0) -> int:
    """Remove every ACL matching the filters (``AclBindingFilter``); how many went."""
    from confluent_kafka.admin import AdminClient

    filters = list(filters)
    if not filters:
        return 0
    admin = AdminClient(dict(admin_config))
    removed = 0
    for future in admin.delete_acls(filters, request_timeout=timeout).values():
        removed += len(future.result())
    _until_applied(admin, filters, False, timeout)
    return removed


def _filter_of(binding: Any) -> Any:
    from confluent_kafka.admin import AclBindingFilter

    return AclBindingFilter(*acl_key(binding))


def _until_applied(admin: Any, filters: list[Any], present: bool, timeout: float) -> None:
    """Wait until the broker's authorizer shows (or no longer shows) what each filter matches.

    In KRaft a broker forwards CreateAcls/DeleteAcls to the controller, which answers once
    the change is committed; the broker's authorizer applies it when it replays the metadata
    log, a moment later. DescribeAcls is answered from that authorizer, so it says when a
    request is judged by the new ACLs.
    """
    deadline = time.monotonic() + timeout
    for acl_filter in filters:
        while bool(admin.describe_acls(acl_filter, request_timeout=timeout).result()) != present:
            if time.monotonic() > deadline:
                raise TimeoutError(f"ACL change not applied by the broker within {timeout:.0f} s: {acl_filter}")
            _pause.wait(0.05)


def acl_bindings(acls: Iterable[Any], principal: str | None = None) -> dict[str, list[Any]]:
    """``mirrorflow.needed_acls.Acl``s as confluent-kafka ``AclBinding``s, per cluster (ALLOW, any host).

    ``principal`` overrides each ACL's own (which must then be known).
    """
    from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourcePatternType, ResourceType

    kinds = {"TOPIC": ResourceType.TOPIC, "GROUP": ResourceType.GROUP, "CLUSTER": ResourceType.BROKER,
             "TRANSACTIONAL_ID": ResourceType.TRANSACTIONAL_ID}
    patterns = {"literal": ResourcePatternType.LITERAL, "prefixed": ResourcePatternType.PREFIXED}
    out: dict[str, list[Any]] = {}
    for acl in acls:
        who = principal or acl.principal
        if not who:
            raise ValueError(f"no principal for {acl}")
        out.setdefault(acl.cluster, []).append(AclBinding(
            kinds[acl.resource_type], acl.name, patterns[acl.pattern_type], who, "*",
            AclOperation[acl.operation], AclPermissionType.ALLOW))
    return out


def acl_key(binding: Any) -> tuple:
    """An ACL binding as a comparable tuple (also the arguments of the ``AclBindingFilter`` that matches it)."""
    return (binding.restype, binding.name, binding.resource_pattern_type, binding.principal, binding.host,
            binding.operation, binding.permission_type)


def held_acls(admin_config: Mapping[str, Any], principal: str | None, timeout: float = 30.0) -> dict[tuple, Any]:
    """Every ACL binding on the cluster (of ``principal``, or of anyone when ``None``), by :func:`acl_key`."""
    from confluent_kafka.admin import (
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    every = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, principal, None, AclOperation.ANY,
                             AclPermissionType.ANY)
    admin = AdminClient(dict(admin_config))  # kept until the answer is in: a destroyed client fails its futures
    return {acl_key(b): b for b in admin.describe_acls(every, request_timeout=timeout).result()}
