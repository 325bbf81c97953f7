"""mirror_level_<L> DAGs run under Airflow's own dag.test(): spark-submit on local[*], real clusters."""

from __future__ import annotations

import json
from datetime import UTC

import pytest

from mirrorflow_airflow.factories.levels import build_level_dags
from tests.integration.mirroring import FOUR, assert_exactly_once, topology, traffic

pytestmark = [pytest.mark.airflow, pytest.mark.kafka]


def xcom(dag_run, task_id: str):
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        row = (
            session.query(XComModel)
            .filter_by(dag_id=dag_run.dag_id, run_id=dag_run.run_id, task_id=task_id, key="return_value")
            .one_or_none()
        )
        return None if row is None else XComModel.deserialize_value(row)


def run_until_quiescent(dags: dict, levels: list[int], max_rounds: int = 6) -> list[dict]:
    """dag.test() every level DAG, lowest level first, until a whole round copies nothing."""
    summaries = []
    for _ in range(max_rounds):
        copied = 0
        for level in levels:
            run = dags[f"mirror_level_{level}"].test()
            summary = xcom(run, "copy")
            assert run.state == "success", summary
            summaries.append(summary)
            copied += summary["copied"]
        if copied == 0:
            return summaries
    raise AssertionError(f"not quiescent after {max_rounds} rounds")


SECRET = "s3cr3t-never-in-a-log"


def test_level_dags_mirror_the_four_cluster_tree_exactly_once(airflow_home, kafka_clusters, make_topic, monkeypatch,
                                                            caplog, capfd):
    topic = make_topic("c1", partitions=2)
    make_topic("c3", partitions=2, name=topic)
    base = topology(kafka_clusters, FOUR, [topic])
    # c2 is named by an Airflow connection, as a cluster with credentials would be.
    data = base.to_dict()
    data["clusters"]["c2"] = {"conn_id": "mf_test_c2"}
    from mirrorflow.topology import Topology

    topo = Topology.parse(data)
    # Its credentials (unused by a plaintext broker, but real client settings) must never be logged.
    monkeypatch.setenv("AIRFLOW_CONN_MF_TEST_C2", json.dumps({"conn_type": "kafka", "extra": {
        "bootstrap.servers": kafka_clusters["c2"].bootstrap, "sasl.username": "mirror", "sasl.password": SECRET}}))
    expected = []
    for c in ("c1", "c3"):  # the other clusters get the topic from the copy job
        expected += traffic(kafka_clusters, c, topic, 25)
    dags = build_level_dags(topo)
    assert set(dags) == {"mirror_level_1", "mirror_level_3"}
    summaries = run_until_quiescent(dags, topo.levels)

    first = summaries[0]
    assert first["level"] == 1 and first["ok"] and first["errors"] == []
    by_link = {l["link"]: l for l in first["links"]}
    assert by_link["c1.L1"]["target"] == "c2" and by_link["c1.L1"]["copied"] == 25
    assert by_link["c1.L1"]["created_topics"] == [topic]  # created on c2 with the source's shape
    assert sum(s["copied"] for s in summaries) == 2 * 25 * 3
    assert_exactly_once(kafka_clusters, topo.leaves, topic, expected)
    out, err = capfd.readouterr()
    assert "spark_submit" in caplog.text + out + err  # the job's output was in the task log
    assert SECRET not in caplog.text + out + err


@pytest.mark.usefixtures("spark_default_connect")
def test_unreachable_cluster_fails_the_run_naming_it(airflow_home, kafka_clusters, make_topic, monkeypatch):
    topic = make_topic("c1")
    base = topology(kafka_clusters, FOUR, [topic]).to_dict()
    base["clusters"]["c2"] = {"conn_id": "mf_test_dead"}
    from mirrorflow.topology import Topology

    monkeypatch.setenv("AIRFLOW_CONN_MF_TEST_DEAD", json.dumps({"conn_type": "kafka", "extra": {
        "bootstrap.servers": "127.0.0.1:9", "socket.connection.setup.timeout.ms": 3000}}))
    dag = build_level_dags(Topology.parse(base))["mirror_level_1"]
    for t in dag.tasks:  # production retries; here one attempt shows the failure
        t.retries = 0
    run = dag.test()
    assert run.state == "failed"
    summary = xcom(run, "copy")
    assert not summary["ok"]
    assert any("c2" in e and "c1.L1" in e for e in summary["errors"]), summary["errors"]
    # the link between healthy clusters was still copied
    assert {l["link"]: l["error"] for l in summary["links"]}["c3.L1"] is None


def test_links_outside_their_window_skip_the_run_and_say_when_it_opens(airflow_home, kafka_clusters, make_topic,
                                                                        caplog):
    from datetime import datetime, timedelta

    topic = make_topic("c1")
    now = datetime.now(UTC)
    start, end = now + timedelta(hours=2), now + timedelta(hours=3)
    window = f"{start:%H:%M}-{end:%H:%M}"
    topo = topology(kafka_clusters, FOUR, [topic], extra=f"""
replication:
  defaults: {{windows: ["{window}"]}}
""")
    dag = build_level_dags(topo)["mirror_level_1"]
    run = dag.test()
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert states == {"plan": "skipped", "copy": "skipped"}
    assert f"outside its replication window(s) {window}" in caplog.text
    assert f"next window opens at {start.replace(second=0, microsecond=0).isoformat()}" in caplog.text


@pytest.mark.spark
def test_level_dag_runs_on_a_spark_standalone_cluster(airflow_home, kafka_clusters, make_topic, spark_standalone,
                                                      monkeypatch):
    master, work_dir = spark_standalone
    host, port = master.removeprefix("spark://").split(":")
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({
        "conn_type": "spark", "host": f"spark://{host}", "port": int(port),
        "extra": {"deploy-mode": "client", "spark-binary": "spark-submit"}}))
    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.1")  # the driver advertises loopback to the executors
    topic = make_topic("c1", partitions=2)
    topo = topology(kafka_clusters, FOUR, [topic])
    expected = traffic(kafka_clusters, "c1", topic, 30)

    run = build_level_dags(topo)["mirror_level_1"].test()
    summary = xcom(run, "copy")
    assert run.state == "success", summary
    assert {l["link"]: l["copied"] for l in summary["links"]}["c1.L1"] == 30
    assert_exactly_once(kafka_clusters, ["c2"], topic, expected)
    # the executors got the core package the way a cluster needs it: shipped with the job
    assert list(work_dir.glob("app-*/*/mirrorflow.zip")), sorted(str(p) for p in work_dir.rglob("*"))[:20]


@pytest.mark.spark
def test_level_dag_runs_on_a_spark_connect_server(airflow_home, kafka_clusters, make_topic, spark_connect_server,
                                                  monkeypatch, caplog):
    """A ``spark_connect`` connection: the driver plans in the task, the Connect server copies; no spark-submit."""
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({
        "conn_type": "spark_connect", "host": "127.0.0.1", "port": spark_connect_server.port}))
    topic = make_topic("c1", partitions=2)
    topo = topology(kafka_clusters, FOUR, [topic])
    expected = traffic(kafka_clusters, "c1", topic, 30)

    run = build_level_dags(topo)["mirror_level_1"].test()
    summary = xcom(run, "copy")
    assert run.state == "success", summary
    assert {l["link"]: l["copied"] for l in summary["links"]}["c1.L1"] == 30
    assert summary["spark_tasks"] >= 1
    assert_exactly_once(kafka_clusters, ["c2"], topic, expected)
    assert f"running on the Spark Connect server sc://127.0.0.1:{spark_connect_server.port}" in caplog.text
    audit = [json.loads(r.getMessage()) for r in caplog.records if r.name == "mirrorflow.audit"]
    assert sum(a["copied"] for a in audit if a["event"] == "copy") == 30  # the audit lines are in the task log
    assert "spark_submit" not in caplog.text
