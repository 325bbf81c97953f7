"""The ACL rules: patterns from regular expressions, the per-role set of a topology, principals, the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from mirrorflow.errors import MirrorflowError
from mirrorflow.naming import NameFormat
from mirrorflow.needed_acls import principal_of, required_acls, resource_pattern
from mirrorflow.needed_acls.__main__ import main
from mirrorflow.needed_acls.principal import principals
from mirrorflow.topology import parse_topology
from mirrorflow_dev.tls import CertificateAuthority

REPO = Path(__file__).resolve().parents[2]

PAIR = """
clusters:
  a: {bootstrap: "127.0.0.1:1"}
  b: {conn_id: kafka_b}
tree: {level: 1, children: [a, b]}
topics: ["orders", "payments\\\\..*"]
offsets: {groups: ["billing-.*", "audit"]}
archive: {clusters: [a]}
schemas:
  primary: a
  clusters:
    b: {via: topic, topic: _schemas_b}
"""


@pytest.mark.parametrize(("regex", "expected"), [
    ("orders", ("literal", "orders", True)),
    ("payments\\..*", ("prefixed", "payments.", True)),
    (".*", ("literal", "*", True)),
    ("billing-.*", ("prefixed", "billing-", True)),
    ("pay(ments|outs)", ("prefixed", "pay", False)),
    ("ordersx?", ("prefixed", "orders", False)),
    ("[a-z]+", ("literal", "*", False)),
])
def test_a_regex_becomes_the_narrowest_acl_pattern_that_covers_it(regex, expected):
    pattern = resource_pattern(regex)
    assert (pattern.pattern_type, pattern.name, pattern.exact) == expected


def _set(acls, cluster=None):
    return {(a.cluster, a.resource_type, a.pattern_type, a.name, a.operation) for a in acls
            if cluster is None or a.cluster == cluster}


def test_a_pair_needs_the_source_and_target_rights_named_after_its_links():
    topology = parse_topology(PAIR, source="test")
    source_target = _set(required_acls(topology, roles=["source", "target"]), "b")
    assert source_target == {
        # b is the source of b.L1 ...
        ("b", "TOPIC", "literal", "orders", "READ"),
        ("b", "TOPIC", "prefixed", "payments.", "READ"),
        ("b", "GROUP", "prefixed", "_mirrorflow", "DESCRIBE"),
        # ... and the target of a.L1: topics made and written, their configs aligned with their owner a (the
        # first cluster listed; ALTER_CONFIGS implies DESCRIBE_CONFIGS), the checkpoint group, the transactions
        ("b", "TOPIC", "literal", "orders", "CREATE"), ("b", "TOPIC", "literal", "orders", "ALTER"),
        ("b", "TOPIC", "literal", "orders", "WRITE"), ("b", "TOPIC", "literal", "orders", "ALTER_CONFIGS"),
        ("b", "TOPIC", "prefixed", "payments.", "CREATE"), ("b", "TOPIC", "prefixed", "payments.", "ALTER"),
        ("b", "TOPIC", "prefixed", "payments.", "WRITE"),
        ("b", "TOPIC", "prefixed", "payments.", "ALTER_CONFIGS"),
        # ... what the config sync last saw there (it tells the owner's change from b's own value)
        *(("b", "TOPIC", "literal", "_mirrorflow.topic-configs", op) for op in ("CREATE", "READ", "WRITE")),
        ("b", "GROUP", "literal", "_mirrorflow.link.a.L1", "READ"),
        ("b", "TRANSACTIONAL_ID", "prefixed", "_mirrorflow.a.L1.", "WRITE"),
        ("b", "CLUSTER", "literal", "kafka-cluster", "DESCRIBE_CONFIGS"),
    }


def test_every_role_adds_what_it_touches_and_implied_operations_are_left_out():
    topology = parse_topology(PAIR, source="test")
    everything = _set(required_acls(topology))
    assert ("a", "TOPIC", "literal", "_mirrorflow.audit", "WRITE") in everything
    assert ("a", "TRANSACTIONAL_ID", "prefixed", "_mirrorflow.audit", "WRITE") in everything
    assert ("b", "GROUP", "prefixed", "billing-", "READ") in everything           # offsets, failover
    assert ("b", "GROUP", "literal", "audit", "READ") in everything
    assert ("b", "GROUP", "literal", "*", "DESCRIBE") in everything                # decommission sees every group
    assert ("b", "TRANSACTIONAL_ID", "literal", "_mirrorflow.preflight.b", "WRITE") in everything
    assert ("a", "TOPIC", "literal", "orders", "ALTER_CONFIGS") in everything       # onboarding aligns configs
    assert ("a", "TOPIC", "literal", "_schemas", "READ") in everything              # the primary registry
    assert {("b", "TOPIC", "literal", "_schemas_b", op) for op in ("CREATE", "READ", "WRITE")} <= everything
    # READ/WRITE/ALTER imply DESCRIBE, ALTER_CONFIGS implies DESCRIBE_CONFIGS: never listed twice
    assert not {k for k in everything if k[4] == "DESCRIBE" and k[:4] + ("READ",) in everything}
    assert ("a", "TOPIC", "literal", "orders", "DESCRIBE_CONFIGS") not in everything
    # never needed: topic deletion, cluster-wide writes, describing the whole cluster
    assert not {k for k in everything if k[4] == "DELETE" and k[1] == "TOPIC"}
    assert not {k for k in everything if k[1] == "CLUSTER" and k[4] != "DESCRIBE_CONFIGS"}


def test_topic_configs_need_alter_configs_on_followers_and_a_record_topic_under_every_policy():
    def acls(section: str) -> set:
        return _set(required_acls(parse_topology(PAIR + section, source="test"), roles=["source", "target"]))

    record = ("TOPIC", "literal", "_mirrorflow.topic-configs")
    synced, kept = acls(""), acls("topic_configs: {on_local_change: keep_target}\n")
    assert ("a", "TOPIC", "literal", "orders", "ALTER_CONFIGS") in synced  # a is the target of b.L1 too
    for section in (synced, kept):  # the record tells an owner's change from a follower's own value
        assert {("b", *record, op) for op in ("CREATE", "READ", "WRITE")} <= section
    off = acls("topic_configs: {sync: false}\n")
    assert not {k for k in off if k[4] == "ALTER_CONFIGS"} and ("b", "TOPIC", "literal", "orders",
                                                                "DESCRIBE_CONFIGS") in off


def test_archive_rights_only_on_archived_clusters():
    topology = parse_topology(PAIR, source="test")
    archive = required_acls(topology, roles=["archive"])
    assert {a.cluster for a in archive} == {"a"}


def test_an_unknown_role_is_named():
    with pytest.raises(MirrorflowError, match=r"unknown role\(s\) \['sauce'\]"):
        required_acls(parse_topology(PAIR, source="test"), roles=["sauce"])


def test_the_principal_comes_from_the_connection_where_it_can_be_known(tmp_path):
    assert principal_of({"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                         "sasl.username": "mirror"}) == "User:mirror"
    assert principal_of({"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER"}) is None
    issued = CertificateAuthority(tmp_path / "ca").issue("mirrorflow")
    assert principal_of({"security.protocol": "SSL", "ssl.certificate.pem": issued.certificate}) == \
        "User:CN=mirrorflow"
    topology = parse_topology(PAIR, source="test")
    env = {"AIRFLOW_CONN_KAFKA_B": json.dumps({"conn_type": "kafka", "extra": {
        "bootstrap.servers": "127.0.0.1:2", "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "mf", "sasl.password": "never-printed"}})}
    assert principals(topology, environ=env) == {"a": "User:ANONYMOUS", "b": "User:mf"}
    assert principals(topology, environ={}) == {"a": "User:ANONYMOUS", "b": None}
    assert principals(topology, given="mirror") == {"a": "User:mirror", "b": "User:mirror"}


def test_the_cli_prints_json_with_exactly_the_documented_keys(tmp_path, capsys, monkeypatch):
    path = tmp_path / "t.yaml"
    path.write_text(PAIR)
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_B", json.dumps({"conn_type": "kafka", "extra": {
        "bootstrap.servers": "127.0.0.1:2", "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "mf", "sasl.password": "never-printed"}}))
    assert main([str(path), "--format", "json"]) == 0
    out = capsys.readouterr().out
    rows = json.loads(out)
    assert rows and all(set(r) == {"cluster", "principal", "resource_type", "pattern_type", "name", "operation"}
                        for r in rows)
    assert {r["principal"] for r in rows if r["cluster"] == "b"} == {"User:mf"}
    assert {r["pattern_type"] for r in rows} == {"literal", "prefixed"}
    assert "never-printed" not in out


def test_the_cli_prints_runnable_kafka_acls_commands(tmp_path):
    path = tmp_path / "t.yaml"
    path.write_text(PAIR.replace('"billing-.*"', '"bill(ing|ed)-.*"'))
    run = subprocess.run([sys.executable, "-m", "mirrorflow.acls", str(path), "--cluster", "a", "--role", "source"],
                         capture_output=True, text=True, cwd=REPO, check=True)
    assert "kafka-acls.sh --bootstrap-server 127.0.0.1:1 --command-config \"$KAFKA_ADMIN_CONFIG\" --add " \
           "--allow-principal User:ANONYMOUS --operation DescribeConfigs --operation Read --topic orders " \
           "--resource-pattern-type literal" in run.stdout
    assert "--topic payments. --resource-pattern-type prefixed" in run.stdout
    assert " b " not in run.stdout.replace("# cluster b", "")
    assert "'bill(ing|ed)-.*' cannot be an ACL pattern; granted as prefixed 'bill'" in run.stderr
    bad = subprocess.run([sys.executable, "-m", "mirrorflow.acls", str(path), "--cluster", "zz"],
                         capture_output=True, text=True, cwd=REPO)
    assert bad.returncode == 2 and "--cluster zz: not in the topology" in bad.stderr


@pytest.mark.parametrize(("regex", "naming", "expected"), [
    ("orders", NameFormat("eu-{topic}", "eu-", ""), ("literal", "eu-orders", True)),
    ("payments\\..*", NameFormat("eu-{topic}", "eu-", ""), ("prefixed", "eu-payments.", True)),
    (".*", NameFormat("eu-{topic}", "eu-", ""), ("prefixed", "eu-", True)),
    ("payments\\..*", NameFormat("{topic}.eu", "", ".eu"), ("prefixed", "payments.", False)),  # wider: no suffix
    (".*", NameFormat("{topic}.eu", "", ".eu"), ("literal", "*", False)),
    ("orders", NameFormat.identity(), ("literal", "orders", True)),
])
def test_a_cluster_with_names_of_its_own_needs_the_acls_under_its_names(regex, naming, expected):
    from mirrorflow.needed_acls.patterns import on_cluster

    said = on_cluster(resource_pattern(regex), naming)
    assert (said.pattern_type, said.name, said.exact) == expected
