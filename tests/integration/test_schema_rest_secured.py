"""Schema sync from a real registry that requires HTTPS with a private CA and HTTP basic auth.

The registry is Apicurio Registry secured by Quarkus itself (fixture
``secured_schema_registry``: TLS only, a certificate from a CA made for the
session, every path needs its one user). Apicurio cannot be a REST target
that keeps ids (no IMPORT mode), so it is the primary, read over REST, and
the target is a storage topic on a real cluster. The refusals are the
server's own; what is checked on our side is that they fail at once with a
sentence that names the registry, the cause and the setting, and never the
password. Only the sync test needs the Kafka clusters: the refusals stop
before any cluster is contacted.
"""

from __future__ import annotations

import json
import logging
import ssl
import time
import uuid
from pathlib import Path

import httpx
import pytest
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient

from mirrorflow.errors import MirrorflowError
from mirrorflow.schemas.records import CONFIG, SCHEMA, Key
from mirrorflow.schemas.rest_store import RegistryAccessError, RestStore
from mirrorflow.schemas.sync import stores_for, sync
from mirrorflow.secrets import scrub
from mirrorflow.topology import Topology, parse_topology
from mirrorflow_dev.tls import CertificateAuthority
from tests.integration.registry import registry_state
from tests.integration.schemas import ADDRESS, CUSTOMER, EVENT, ORDER, ORDER_V2

#: Refusals must not sit in the client's retries (1 s, 2 s, 4 s back-off): one request decides.
FAST = 3.0
#: Nothing listens here: the refusal tests must stop before the target cluster is ever contacted.
NOWHERE = {"c1": "127.0.0.1:9", "c2": "127.0.0.1:9"}


def two_clusters(bootstrap: dict[str, str], c1: str, storage: str = "_mirrorflow.unused") -> Topology:
    """c1's registry over REST (``c1`` is its YAML mapping) as the primary; c2's in a storage topic."""
    return parse_topology(f"""
clusters:
  c1: {{bootstrap: "{bootstrap['c1']}"}}
  c2: {{bootstrap: "{bootstrap['c2']}"}}
tree:
  level: 1
  children: [c1, c2]
topics: ["unused"]
schemas:
  primary: c1
  clusters:
    c1: {c1}
    c2: {{topic: "{storage}", subject_format: "{{topic}}"}}
""", source="test")


def rest_primary(secured, bootstrap: dict[str, str], tenant: str = "t", storage: str = "_mirrorflow.unused"):
    c1 = f'{{via: rest, url: "{secured.url}", subject_format: "{{tenant}}-{{topic}}", values: {{tenant: {tenant}}}}}'
    return two_clusters(bootstrap, c1, storage)


def client_settings(bootstrap: dict[str, str]) -> dict[str, dict]:
    return {name: {"bootstrap.servers": address} for name, address in bootstrap.items()}


def test_the_registry_itself_refuses_anonymous_and_wrong_passwords_and_speaks_only_tls(secured_schema_registry):
    reg = secured_schema_registry
    trusted = ssl.create_default_context(cafile=str(reg.ca_path))
    with httpx.Client(verify=trusted, timeout=10) as http:
        anonymous = http.get(f"{reg.url}/subjects")
        assert anonymous.status_code == 401
        assert anonymous.headers.get("www-authenticate", "").lower().startswith("basic")
        assert http.get(f"{reg.url}/subjects", auth=(reg.user, reg.password + "x")).status_code == 401
        assert http.get(f"{reg.url}/subjects", auth=("nobody", reg.password)).status_code == 401
        assert http.get(f"{reg.url}/subjects", auth=(reg.user, reg.password)).status_code == 200
    with pytest.raises(httpx.HTTPError):  # plain HTTP on the same port gets no answer at all
        httpx.get(reg.url.replace("https://", "http://", 1) + "/subjects", timeout=5)
    # The password reached the JVM through its environment, not its command line; the key is private.
    assert reg.password.encode() not in Path(f"/proc/{reg.registry.pid}/cmdline").read_bytes()
    assert (reg.registry.run_dir / "server.key").stat().st_mode & 0o777 == 0o600
    assert reg.password not in reg.registry.log_path.read_text(errors="replace")


@pytest.mark.kafka
def test_a_secured_rest_primary_syncs_every_subject_with_ids_and_versions_kept(kafka_clusters,
                                                                              secured_schema_registry):
    reg = secured_schema_registry
    tenant = f"t{uuid.uuid4().hex[:6]}"  # the registry is shared by the session: own subject names
    storage = f"_mirrorflow.test-schemas-{uuid.uuid4().hex[:8]}"
    sr = SchemaRegistryClient(reg.conf())
    p = f"{tenant}-"
    ids = {("orders-value", 1): sr.register_schema(p + "orders-value", Schema(ORDER, "AVRO")),
           ("orders-value", 2): sr.register_schema(p + "orders-value", Schema(ORDER_V2, "AVRO")),
           ("events-value", 1): sr.register_schema(p + "events-value", Schema(EVENT, "JSON")),
           ("address", 1): sr.register_schema(p + "address", Schema(ADDRESS, "PROTOBUF"))}
    ids["customers-value", 1] = sr.register_schema(p + "customers-value", Schema(
        CUSTOMER, "PROTOBUF", [SchemaReference("address.proto", p + "address", 1)]))
    sr.set_compatibility(p + "orders-value", "FORWARD")
    bootstrap = {name: kafka_clusters[name].bootstrap for name in ("c1", "c2")}
    topo = rest_primary(reg, bootstrap, tenant, storage)

    result = sync(*stores_for(topo, client_settings(bootstrap), {"c1": reg.conf()}))
    [c2] = result.targets
    assert c2.error is None and c2.conflicts == [], result.problems
    state = registry_state(bootstrap["c2"], "c2", storage)
    synced = {(k.subject, k.version): v["id"] for k, v in state.entries.items() if k.keytype == SCHEMA}
    assert synced == ids, "every subject and version of the tenant, each under the id the primary gave it"
    assert state.get(Key(SCHEMA, "customers-value", 1))["references"] == [
        {"name": "address.proto", "subject": "address", "version": 1}]
    assert state.get(Key(CONFIG, "orders-value"))["compatibilityLevel"] == "FORWARD"

    again = sync(*stores_for(topo, client_settings(bootstrap), {"c1": reg.conf()}))
    assert again.problems == [] and again.written == 0, "a rerun changes nothing"


def test_a_wrong_password_fails_at_once_naming_the_registry_and_401_never_the_password(secured_schema_registry,
                                                                                        caplog):
    reg = secured_schema_registry
    wrong = f"wrong-{uuid.uuid4().hex}"
    caplog.set_level(logging.DEBUG)
    started = time.monotonic()
    with pytest.raises(RegistryAccessError) as refused:
        sync(*stores_for(rest_primary(reg, NOWHERE), client_settings(NOWHERE),
                         {"c1": reg.conf(**{"basic.auth.user.info": f"{reg.user}:{wrong}"})}))
    elapsed = time.monotonic() - started
    message = str(refused.value)
    assert message == (f"registry {reg.url} of cluster c1: the registry refused the login of user 'mirrorflow' "
                       "(HTTP 401, authentication failed): check the login and password of the connection of "
                       "schemas.clusters.c1 (basic.auth.user.info)")
    assert elapsed < FAST, f"took {elapsed:.1f}s"
    assert wrong not in message and wrong not in caplog.text and reg.password not in caplog.text

    with pytest.raises(RegistryAccessError, match=r"requires a login \(HTTP 401, authentication required\) and "
                                                  "none is configured"):
        RestStore("c1", reg.conf(**{"basic.auth.user.info": None})).read()


@pytest.mark.parametrize("ca", ["none", "another CA"])
def test_an_untrusted_certificate_fails_at_once_saying_which_setting_to_give(secured_schema_registry, ca,
                                                                             tmp_path, caplog):
    reg = secured_schema_registry
    other = str(CertificateAuthority(tmp_path / "ca", name="another-ca").path) if ca == "another CA" else None
    caplog.set_level(logging.DEBUG)
    started = time.monotonic()
    with pytest.raises(RegistryAccessError) as refused:
        sync(*stores_for(rest_primary(reg, NOWHERE), client_settings(NOWHERE),
                         {"c1": reg.conf(**{"ssl.ca.location": other})}))
    elapsed = time.monotonic() - started
    message = str(refused.value)
    assert message.startswith(f"registry {reg.url} of cluster c1: the registry's TLS certificate is not trusted "
                              "(unable to get local issuer certificate): "), message
    if ca == "none":
        assert message.endswith("no CA is configured (the system's CAs do not know it): give the CA that signed it "
                                "as ssl.ca.pem (inline PEM) or ssl.ca.location (a file) in the connection's extra")
    else:
        assert message.endswith("it is not signed by the CA in ssl.ca.location / ssl.ca.pem: give the CA that "
                                "signed the registry's certificate")
    assert elapsed < FAST, f"took {elapsed:.1f}s"
    assert reg.password not in message and reg.password not in caplog.text


def test_the_hook_builds_the_client_conf_from_an_airflow_connection_with_an_inline_ca(secured_schema_registry,
                                                                                     monkeypatch):
    from airflow.sdk.log import redact

    from mirrorflow_airflow.hooks.registry import SchemaRegistryHook

    reg = secured_schema_registry
    monkeypatch.setenv("AIRFLOW_CONN_SECURED_REGISTRY", json.dumps({
        "conn_type": "http", "host": reg.url, "login": reg.user, "password": reg.password,
        "extra": {"ssl.ca.pem": reg.ca_pem, "timeout": 20}}))
    topo = two_clusters(NOWHERE, "{via: rest, conn_id: secured_registry}")

    conf = SchemaRegistryHook(topo, "c1").conf()
    assert conf is not None
    ca_file = Path(conf.pop("ssl.ca.location"))
    assert conf == {"url": reg.url, "basic.auth.user.info": f"{reg.user}:{reg.password}", "timeout": 20}
    assert ca_file.read_text() == reg.ca_pem and ca_file.stat().st_mode & 0o777 == 0o600
    assert ca_file.parent.stat().st_mode & 0o777 == 0o700
    # Known as a secret: Airflow's task-log masker and mirrorflow's own scrubbing (audit lines) hide it.
    assert redact(f"said {reg.password} aloud") == "said *** aloud"
    assert scrub(f"said {reg.password} aloud") == "said *** aloud"

    # The conf gets in: the store reads the registry with it (the CA from the file the hook wrote).
    assert RestStore("c1", SchemaRegistryHook(topo, "c1").conf()).read().get(Key(CONFIG, None)) is not None

    monkeypatch.setenv("AIRFLOW_CONN_SECURED_REGISTRY", json.dumps({
        "conn_type": "http", "host": reg.url, "login": reg.user, "password": reg.password,
        "extra": {"ssl.ca.pem": reg.ca_pem, "ssl.ca.location": str(reg.ca_path)}}))
    with pytest.raises(MirrorflowError, match="connection 'secured_registry': .*give ssl.ca.pem or ssl.ca.location, "
                                        "not both"):
        SchemaRegistryHook(topo, "c1").conf()
