"""mirror_schemas under Airflow's own dag.test() against real clusters (storage-topic registries)."""

from __future__ import annotations

import json
import logging
from datetime import timedelta

import pytest
from airflow.sdk import DeltaTriggerTimetable

from mirrorflow.schemas.records import SCHEMA, Key
from mirrorflow_airflow.factories.schemas import DAG_ID, build_schemas_dag
from tests.dags.dag_runs import states, task_output, xcom
from tests.integration.schemas import ORDER, P, plant, register_all, schema_topology, state_of

pytestmark = [pytest.mark.airflow, pytest.mark.kafka]


def audits(caplog, event: str) -> list[dict]:
    return [json.loads(r.getMessage()) for r in caplog.records
            if r.name == "mirrorflow.audit" and f'"event":"{event}"' in r.getMessage()]


def test_the_dag_file_builds_one_sync_task_per_target(dagbag):
    dag = dagbag.get_dag(DAG_ID)
    assert dag is not None, sorted(dagbag.dag_ids)
    # topologies/demo.yaml: primary c1, four clusters
    assert {t.task_id for t in dag.tasks} == {"sync_c2", "sync_c3", "sync_c4"}
    assert dag.max_active_runs == 1 and not dag.catchup
    assert dag.timetable == DeltaTriggerTimetable(timedelta(minutes=1))
    assert "dry_run" in dag.params


def test_without_a_primary_the_dag_says_there_is_nothing_to_do(kafka_clusters, caplog):
    from tests.integration.mirroring import FOUR, topology

    caplog.set_level(logging.INFO)
    run = build_schemas_dag(topology(kafka_clusters, FOUR, ["unused"])).test()
    assert states(run) == {"disabled": "success"}
    assert "no schemas.primary" in caplog.text


def test_a_run_syncs_every_target_and_audits_each_write(kafka_clusters, airflow_home, caplog):
    topo, storage, reg = schema_topology(kafka_clusters)
    ids = register_all(reg)
    caplog.set_level(logging.INFO)

    dry = build_schemas_dag(topo).test(run_conf={"dry_run": True})
    assert states(dry) == {"sync_c2": "success", "sync_c3": "success", "sync_c4": "success"}
    assert audits(caplog, "schema_write") == [], "a dry run writes nothing"
    assert state_of(kafka_clusters, "c2", storage).entries == {}
    assert "would write" in caplog.text

    caplog.clear()
    run = build_schemas_dag(topo).test(run_conf={"dry_run": False})
    assert states(run) == {"sync_c2": "success", "sync_c3": "success", "sync_c4": "success"}
    writes = audits(caplog, "schema_write")
    assert len(writes) == 21  # 5 versions + 2 configs, on each of three targets
    orders = next(w for w in writes if w["cluster"] == "c2" and w["target_subject"] == "acme-prod-orders-value"
                  and w["version"] == 2)
    assert orders["primary_subject"] == P + "orders-value" and orders["id"] == ids["orders2"][0]
    assert orders["kind"] == "schema"
    assert xcom(run, "sync_c3")["targets"][0]["written"] == 7
    assert state_of(kafka_clusters, "c3", storage).get(Key(SCHEMA, "orders-value", 2))["id"] == ids["orders2"][0]


def test_a_conflict_fails_only_its_target_task_naming_the_subject(kafka_clusters, airflow_home, caplog, capfd):
    topo, storage, reg = schema_topology(kafka_clusters)
    register_all(reg)
    plant(kafka_clusters, "c4", storage, "acme-prod-orders-value", first_id=41)

    run = build_schemas_dag(topo).test(run_conf={"dry_run": False})  # production retries: a conflict is final
    assert states(run) == {"sync_c2": "success", "sync_c3": "success", "sync_c4": "failed"}
    output = task_output(caplog, capfd)
    assert "1 subject(s) not synced to c4" in output
    assert "cluster c4: subject 'acme-prod-orders-value' version 1 id 1: the target holds a different schema" in output
    c4 = state_of(kafka_clusters, "c4", storage)
    assert c4.get(Key(SCHEMA, "acme-prod-orders-value", 1))["schema"] != ORDER
    assert c4.get(Key(SCHEMA, "acme-prod-orders-value", 2)) is None
    assert c4.get(Key(SCHEMA, "acme-prod-customers-value", 1)) is not None


def test_a_rest_primary_named_by_a_connection_syncs_and_its_password_never_reaches_the_log(
        kafka_clusters, airflow_home, schema_registry, monkeypatch, caplog, capfd):
    import uuid

    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

    from mirrorflow.topology.model import Topology
    from mirrorflow_airflow.hooks.registry import SchemaRegistryHook

    secret = f"pw-{uuid.uuid4().hex}"
    host, _, rest = schema_registry.url.removeprefix("http://").partition(":")
    port, _, path = rest.partition("/")
    monkeypatch.setenv("AIRFLOW_CONN_PRIMARY_REGISTRY", json.dumps({
        "conn_type": "http", "host": f"http://{host}", "port": int(port), "login": "sync", "password": secret,
        "extra": {"url": f"http://{host}:{port}/{path}"}}))
    topo, storage, _ = schema_topology(kafka_clusters)
    data = topo.to_dict()
    tenant = f"t{uuid.uuid4().hex[:6]}"
    data["schemas"]["clusters"]["c1"] = {"via": "rest", "conn_id": "primary_registry",
                                         "subject_format": "{tenant}-{topic}", "values": {"tenant": tenant}}
    topo = Topology.parse(data)
    conf = SchemaRegistryHook(topo, "c1").conf()
    assert conf == {"url": schema_registry.url, "basic.auth.user.info": f"sync:{secret}"}
    sr = SchemaRegistryClient({"url": schema_registry.url})
    sid = sr.register_schema(f"{tenant}-orders-value", Schema(ORDER, "AVRO"))

    caplog.set_level(logging.DEBUG)
    run = build_schemas_dag(topo).test(run_conf={"dry_run": False})
    assert states(run) == {"sync_c2": "success", "sync_c3": "success", "sync_c4": "success"}
    assert state_of(kafka_clusters, "c2", storage).get(Key(SCHEMA, "acme-prod-orders-value", 1))["id"] == sid
    assert secret not in task_output(caplog, capfd)
