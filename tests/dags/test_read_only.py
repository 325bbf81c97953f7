"""A read-only cluster (``acl_sync.read_only``) on secured clusters: every writer but mirrorflow refused there,
until a failover of the consumer groups moves the applications there; a failback closes it again.

A pair with the authorizer on: c1 over SCRAM, c2 over mutual TLS, mirrorflow's
principal holding exactly the derived ``source``, ``target`` and ``failover`` ACLs.
The application ``User:app`` may write the mirrored topic on c1; ACL sync carries
that grant to c2 (``write: keep``, the active-passive set-up), where the guard denies
it. The failover DAG runs for real (``dag.test()``), both ways (a dry run of the
guard's task is called directly: a whole DAG run costs 8 s). c2 names mirrored
topics and groups its own way (``eu-<name>``): the synced grant, the guard's denies
and its lifted topics all name c2's topic, the reports the logical one.
"""

from __future__ import annotations

import json
import logging
import secrets
import time
import uuid

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from mirrorflow.needed_acls import principal_of, required_acls
from mirrorflow.topology import Topology
from mirrorflow_airflow.factories.failover import build_failover_dag
from mirrorflow_airflow.steps.failover import read_only_guard
from mirrorflow_dev.secured import scram_config, upsert_scram_user
from tests.dags.dag_runs import xcom
from tests.fixtures.secured import connections_env
from tests.integration.groups import consume_and_commit
from tests.integration.mirroring import run_level

pytestmark = [pytest.mark.airflow, pytest.mark.kafka]

APP = "User:app"


def _write(config: dict, topic: str, value: str) -> KafkaError | None:
    """One record produced and flushed: ``None`` when it was written, else the broker's refusal."""
    outcome: list[KafkaError | None] = []
    producer = Producer({**config, "message.timeout.ms": 15000})
    producer.produce(topic, value.encode(), on_delivery=lambda err, _msg: outcome.append(err))
    producer.flush(30)
    assert outcome, f"no delivery report for {value} within 30 s"
    return outcome[0]


def _until(config: dict, topic: str, refused: bool, timeout: float = 30.0) -> None:
    """Write until the answer is the expected one: an ACL change reaches the broker's authorizer shortly after."""
    deadline = time.monotonic() + timeout
    while True:
        error = _write(config, topic, f"probe-{uuid.uuid4().hex[:6]}")
        denied = error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
        if (denied if refused else error is None):
            return
        assert time.monotonic() < deadline, f"{topic}: still {'written' if refused else error} after {timeout} s"


def _denies(secured, cluster: str) -> set[tuple[str, str]]:
    admin = AdminClient(secured.admin(cluster))  # kept: a collected client cancels its futures
    found = admin.describe_acls(AclBindingFilter(ResourceType.TOPIC, None, ResourcePatternType.ANY, None, None,
                                                 AclOperation.WRITE, AclPermissionType.DENY),
                                request_timeout=30).result(timeout=35)
    return {(b.principal, b.name) for b in found}


def test_a_read_only_cluster_refuses_every_writer_but_mirrorflow_until_its_groups_fail_over_to_it(
        airflow_home, mirrorflow_acls, as_current, owners, monkeypatch, caplog):  # noqa: F811
    secured = mirrorflow_acls
    prefix = f"ro{uuid.uuid4().hex[:6]}"
    topic, open_topic, group = f"{prefix}.orders", f"{prefix}.open", f"{prefix}-app"
    settings = {"c1": secured.scram("c1"), "c2": secured.mtls("c2")}
    conn_ids = {name: f"mf_ro_{name}_{uuid.uuid4().hex[:4]}" for name in settings}
    for key, value in connections_env({conn_ids[n]: s for n, s in settings.items()}).items():
        monkeypatch.setenv(key, value)
    names = {"c2": {"names": {"topic_prefix": "eu-", "group_prefix": "eu-"}}}
    topology = as_current(Topology.parse({
        "clusters": {n: {"conn_id": c, **names.get(n, {})} for n, c in conn_ids.items()},
        "tree": {"level": 1, "children": ["c1", "c2"]}, "topics": [f"{prefix}\\..*"],
        "offsets": {"groups": [f"{prefix}-.*"]},
        "acl_sync": {"enabled": True, "read_only": ["c2"], "unmapped": {"c2": "keep"}}}))  # same logins
    on_c2, open_on_c2 = f"eu-{topic}", f"eu-{open_topic}"
    secured.grant_acls(required_acls(topology, {n: principal_of(s) for n, s in settings.items()},
                                     roles=["source", "target", "failover"]))
    password = secrets.token_urlsafe(16)
    app = {}
    for cluster in ("c1", "c2"):
        upsert_scram_user(secured.admin(cluster), "app", password)
        app[cluster] = scram_config(secured.kafka[cluster].bootstrap, secured.ca_pem, "app", password)
    admin = AdminClient(secured.admin("c1"))  # kept: a collected client cancels its futures
    for name in (topic, open_topic):
        admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)
    secured.grant("c1", [AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, APP, "*",
                                    AclOperation.WRITE, AclPermissionType.ALLOW)])
    # on c2 by hand: every principal may write the other topic; a DENY for User:* would deny mirrorflow too
    secured.grant("c2", [AclBinding(ResourceType.TOPIC, open_on_c2, ResourcePatternType.LITERAL, "User:*", "*",
                                    AclOperation.WRITE, AclPermissionType.ALLOW)])
    caplog.set_level(logging.INFO)
    try:
        first = run_level(topology, 1, settings)
        assert first.ok, first.summary()["errors"]
        (report,) = [r for r in first.links if r.target == "c2"]
        assert f"DENY {APP} WRITE on TOPIC {on_c2!r} (literal) from *" in report.acls_created
        assert f"ALLOW {APP} WRITE on TOPIC {on_c2!r} (literal) from *" in report.acls_created  # synced, kept
        (unguarded,) = report.acl_problems
        assert "User:*" in unguarded and repr(open_on_c2) in unguarded
        assert _denies(secured, "c2") == {(APP, on_c2)}
        _until(app["c2"], on_c2, refused=True)               # a misrouted producer fails at once
        assert _write(app["c1"], topic, "on-c1") is None     # the active cluster takes it
        consume_and_commit(secured.admin("c1"), topic, group, 1)
        second = run_level(topology, 1, settings)            # mirrorflow still writes c2
        assert second.ok and second.copied >= 1, second.summary()
        (report,) = [r for r in second.links if r.target == "c2"]
        assert not report.acls_created and not report.acls_deleted  # nothing differs: nothing done

        conf = {"groups": [group], "from_cluster": "c1", "to_cluster": "c2", "mode": "planned",
                "precision": "exact", "dry_run": False, "force": False}
        dag = build_failover_dag(topology)
        over = dag.test(run_conf=conf)
        assert over.state == "success", xcom(over, "switch")
        assert owners()[group] == "c2"
        (moved,) = xcom(over, "read_only_guard")["moved"]
        assert moved == {"cluster": "c2", "lifted": [topic], "problems": [unguarded]}
        assert not _denies(secured, "c2")
        _until(app["c2"], on_c2, refused=False)              # the application writes where its groups are
        third = run_level(topology, 1, settings)             # and the next level run leaves it open
        assert third.ok and third.copied >= 1, third.summary()
        assert not _denies(secured, "c2")
        summary = xcom(over, "switch")  # a dry run of the failback: the guard task says what, and changes nothing
        dry = {**summary, "dry_run": True, "plan": {**summary["plan"], "source": "c2", "target": "c1"}}
        assert read_only_guard(topology, dry) == {"moved": []} and not _denies(secured, "c2")

        back = dag.test(run_conf={**conf, "from_cluster": "c2", "to_cluster": "c1"})
        assert back.state == "success", xcom(back, "switch")
        (moved,) = xcom(back, "read_only_guard")["moved"]
        assert moved["cluster"] == "c2" and moved["rearmed"] == [topic]
        assert _denies(secured, "c2") == {(APP, on_c2)}
        _until(app["c2"], on_c2, refused=True)
        events = [json.loads(line[line.index("{"):]) for line in caplog.text.splitlines()
                  if '"event":"read_only_' in line]
        assert [(e["event"], e["cluster"], e["topics"]) for e in events] == [
            ("read_only_lifted", "c2", [topic]), ("read_only_rearmed", "c2", [topic])]
    finally:
        for cluster in ("c1", "c2"):
            secured.revoke(cluster, [AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, who, None,
                                                      AclOperation.ANY, AclPermissionType.ANY)
                                     for who in (APP, "User:*")])
