"""mirror_level_<L> DAGs run under Airflow's own dag.test() against real clusters."""

from __future__ import annotations

import json

import pytest
from confluent_kafka import Producer

from mirrorflow.topology import parse_topology
from mirrorflow_airflow.factories.levels import build_level_dags

pytestmark = [pytest.mark.airflow, pytest.mark.kafka]


def _topology(kafka_clusters, topic: str, c2_conn_id: str):
    b = {name: kafka_clusters[name].bootstrap for name in ("c1", "c2", "c3", "c4")}
    return parse_topology(
        f"""
clusters:
  c1: {{bootstrap: "{b['c1']}"}}
  c2: {{conn_id: {c2_conn_id}}}
  c3: {{bootstrap: "{b['c3']}"}}
  c4: {{bootstrap: "{b['c4']}"}}
tree:
  level: 3
  children:
    - {{level: 1, children: [c1, c2]}}
    - {{level: 1, children: [c3, c4]}}
topics: ["{topic}"]
""",
        source="test",
    )


def _xcom(dag_run, task_id: str):
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        row = (
            session.query(XComModel)
            .filter_by(dag_id=dag_run.dag_id, run_id=dag_run.run_id, task_id=task_id, key="return_value")
            .one()
        )
        return XComModel.deserialize_value(row)


def test_level_dags_plan_every_link_on_real_clusters(airflow_home, kafka_clusters, make_topic, monkeypatch):
    topic = make_topic("c1", partitions=3)
    producer = Producer({"bootstrap.servers": kafka_clusters["c1"].bootstrap})
    for i in range(30):
        producer.produce(topic, key=str(i).encode(), value=b"v", partition=i % 3)
    assert producer.flush(30) == 0

    # c2 is named by an Airflow connection, as a cluster with secrets would be.
    monkeypatch.setenv(
        "AIRFLOW_CONN_MF_TEST_C2",
        json.dumps({"conn_type": "kafka", "extra": {"bootstrap.servers": kafka_clusters["c2"].bootstrap}}),
    )
    dags = build_level_dags(_topology(kafka_clusters, topic, "mf_test_c2"))
    assert set(dags) == {"mirror_level_1", "mirror_level_3"}

    run = dags["mirror_level_3"].test()
    assert run.state == "success"
    result = _xcom(run, "plan_links")
    by_source = {p["source"]: p for p in result["plans"]}
    assert set(by_source) == {"c1", "c2", "c3", "c4"}
    assert by_source["c1"]["target"] == "c3" and by_source["c2"]["target"] == "c4"
    assert (by_source["c1"]["partitions"], by_source["c1"]["offsets_available"]) == (3, 30)
    assert by_source["c2"]["partitions"] == 0  # the topic exists only on c1 so far
    ids = {p["source_cluster_id"] for p in result["plans"]}
    assert len(ids) == 4  # four independent clusters


def test_unreachable_cluster_fails_the_run_naming_it(airflow_home, kafka_clusters, make_topic, monkeypatch):
    topic = make_topic("c1")
    monkeypatch.setenv("AIRFLOW_CONN_MF_TEST_DEAD", json.dumps({"conn_type": "kafka", "extra": {"bootstrap.servers": "127.0.0.1:9"}}))
    dag = build_level_dags(_topology(kafka_clusters, topic, "mf_test_dead"))["mirror_level_1"]
    for t in dag.tasks:  # production retries; here one attempt shows the failure
        t.retries = 0
    run = dag.test()
    assert run.state == "failed"
    ti = run.get_task_instance("plan_links")
    assert ti.state == "failed"
