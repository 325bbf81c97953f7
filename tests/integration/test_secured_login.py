"""A client that cannot get into a secured cluster is told why at once, and never waits out a timeout.

Real secured brokers (tests.fixtures.secured): a wrong password, a broker
certificate from a CA the client does not trust, a client certificate the broker
does not trust, an expired one, none at all, and a plaintext client at a TLS port.
Each must fail the probe that starts every plan within seconds (the issue's
bound is 30), with a sentence naming the cause and no secret in it.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from mirrorflow.errors import ClusterLoginFailed
from mirrorflow.kafka.admin import probe
from mirrorflow.kafka.config import ClusterClient
from mirrorflow_dev.secured import mtls_config, scram_config
from mirrorflow_dev.tls import CertificateAuthority

BOUND_S = 30.0


def _refused(settings: dict) -> tuple[str, float]:
    started = time.monotonic()
    with pytest.raises(ClusterLoginFailed) as caught:
        probe(ClusterClient("c1", settings), timeout=20.0)
    return str(caught.value), time.monotonic() - started


def test_the_mirrorflow_user_gets_in_over_scram_and_over_mutual_tls(secured_kafka):
    assert probe(ClusterClient("c1", secured_kafka.scram("c1"))).brokers == 1
    assert probe(ClusterClient("c4", secured_kafka.mtls("c4"))).brokers == 1


def test_a_wrong_password_is_named_within_seconds(secured_kafka):
    message, took = _refused(scram_config(secured_kafka.kafka["c1"].bootstrap, secured_kafka.ca_pem,
                                          "mirrorflow", "not-the-password"))
    assert took < BOUND_S
    assert "authentication failed" in message and "'mirrorflow'" in message and "SCRAM-SHA-512" in message
    assert "not-the-password" not in message


def test_an_untrusted_broker_certificate_is_named(secured_kafka, tmp_path: Path):
    stranger = CertificateAuthority(tmp_path / "other-ca", name="some-other-ca")
    message, took = _refused(scram_config(secured_kafka.kafka["c1"].bootstrap, stranger.pem, "mirrorflow",
                                          secured_kafka.password))
    assert took < BOUND_S
    assert "broker's certificate is not trusted" in message and "ssl.ca.pem" in message


@pytest.mark.parametrize("kind", ["untrusted", "expired", "missing"])
def test_a_client_certificate_the_broker_refuses_is_named(secured_kafka, tmp_path: Path, kind: str):
    cluster = secured_kafka.kafka["c4"]
    if kind == "untrusted":
        issued = CertificateAuthority(tmp_path / "other-ca", name="some-other-ca").issue("mirrorflow")
        expected = "issued by CN=some-other-ca) is not signed by a CA the broker trusts"
    elif kind == "expired":
        issued = cluster.security.authority().issue("mirrorflow", expired=True)
        expected = "ssl.certificate.pem expired on"
    else:
        issued = None
        expected = "no client certificate is configured"
    settings = (mtls_config(cluster.ssl_bootstrap, secured_kafka.ca_pem, issued) if issued else
                {"bootstrap.servers": cluster.ssl_bootstrap, "security.protocol": "SSL",
                 "ssl.ca.pem": secured_kafka.ca_pem})
    message, took = _refused(settings)
    assert took < BOUND_S
    assert "the broker refused this client's certificate" in message and expected in message
    assert "PRIVATE KEY" not in message


@pytest.mark.parametrize("listener", ["sasl_ssl", "ssl"])
def test_a_plaintext_client_at_a_tls_port_is_named(secured_kafka, listener: str):
    cluster = secured_kafka.kafka["c1"]
    address = cluster.bootstrap if listener == "sasl_ssl" else cluster.ssl_bootstrap
    message, took = _refused({"bootstrap.servers": address})
    assert took < BOUND_S
    assert f"security.protocol is PLAINTEXT but {address} speaks TLS" in message


def test_a_tls_client_at_a_plaintext_port_is_named(secured_kafka, kafka_clusters):
    message, took = _refused(scram_config(kafka_clusters["c1"].bootstrap, secured_kafka.ca_pem, "mirrorflow",
                                          secured_kafka.password))
    assert took < BOUND_S
    assert "does not speak TLS" in message
