"""The failover form, used from the Airflow UI: headless Chromium against ``airflow standalone``.

A user logs in, opens ``mirror_failover_consumer_group``, fills its form (the
cluster fields are drop-downs of the topology's clusters), triggers it, and
watches the run succeed; the consumer group then stands on the other cluster
exactly where it stood on the first one.

The set-up is real throughout: the session's Kafka clusters c1..c4 in the
four-cluster tree, a topic only c1 produces to, mirrored to every cluster by
the same copy job the level DAGs run, and a consumer group ``ui-orders`` that
consumed part of it on c1, committed, and left (no members). Standalone runs
this repo's dags/ and plugins/ on a topology file that names these clusters.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from mirrorflow.topology import Topology, parse_topology
from tests.fixtures.browser import AirflowUI
from tests.fixtures.kafka import wait_for_topic
from tests.fixtures.standalone import Standalone
from tests.integration.kafka_io import produce, read_all
from tests.integration.mirroring import FOUR, clients, converge

pytestmark = [pytest.mark.e2e, pytest.mark.kafka, pytest.mark.timeout(1200)]

DAG_ID = "mirror_failover_consumer_group"
CLUSTERS = ("c1", "c2", "c3", "c4")
GROUP = "ui-orders"
PARTITIONS = 3
PER_PARTITION = 30  # messages produced on c1 into each partition
CONSUMED = {0: 11, 1: 4, 2: 23}  # what the group consumed and committed on c1, per partition
RUN_TIMEOUT = 300.0  # queueing, a LocalExecutor worker, the failover task: generous on a busy two-core machine


@pytest.fixture(scope="module")
def failover_topic() -> str:
    return f"ui-orders-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def failover_topology(kafka_clusters, failover_topic, tmp_path_factory) -> tuple[Path, Topology]:
    """The four-cluster tree on the session clusters, selecting only this module's topic: as a file and parsed."""
    lines = ["name: ui-failover", "clusters:"]
    lines += [f'  {n}: {{bootstrap: "{kafka_clusters[n].bootstrap}"}}' for n in CLUSTERS]
    text = "\n".join(lines) + f"\ntree:{FOUR}topics: [\"{failover_topic}\"]\n"
    path = tmp_path_factory.mktemp("ui-failover") / "topology.yaml"
    path.write_text(text)
    return path, parse_topology(text, source=str(path))


@pytest.fixture(scope="module")
def standalone_topology(failover_topology) -> Path:
    return failover_topology[0]


@pytest.fixture(scope="module")
def standalone_dag_ids() -> tuple[str, ...]:
    return (DAG_ID,)


@pytest.fixture(scope="module")
def consumed_group(kafka_clusters, failover_topic, failover_topology) -> dict[int, int]:
    """``ui-orders`` consumed part of the topic on c1 and left; the topic is mirrored everywhere.

    Returns the group's committed offsets on c1 (per partition).
    """
    topic, topology = failover_topic, failover_topology[1]
    for name in CLUSTERS:
        admin = AdminClient({"bootstrap.servers": kafka_clusters[name].bootstrap})
        admin.create_topics([NewTopic(topic, PARTITIONS, 1)], operation_timeout=30)[topic].result(timeout=60)
        wait_for_topic(admin, topic, PARTITIONS)
    c1 = kafka_clusters["c1"].bootstrap
    now = int(time.time() * 1000)
    for p in range(PARTITIONS):
        records = [(f"k{p}".encode(), f"c1|{p}|{i:04d}".encode(), None, now - PER_PARTITION + i)
                   for i in range(PER_PARTITION)]
        produce(c1, topic, records, partition=p)

    # A real member of the group: it joins, is assigned every partition, reads, commits what it processed, leaves.
    consumer = Consumer({"bootstrap.servers": c1, "group.id": GROUP, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    seen: dict[int, int] = {}
    deadline = time.monotonic() + 90
    try:
        while any(seen.get(p, 0) < n for p, n in CONSUMED.items()):
            assert time.monotonic() < deadline, f"the group read only {seen} of {CONSUMED} on c1"
            for msg in consumer.consume(100, timeout=0.05):  # a partial batch waits the whole timeout
                if msg.error() is None:
                    seen[msg.partition()] = max(seen.get(msg.partition(), 0), msg.offset() + 1)
        consumer.commit(offsets=[TopicPartition(topic, p, n) for p, n in CONSUMED.items()], asynchronous=False)
    finally:
        consumer.close()
    assert committed(c1, topic) == CONSUMED

    converge(topology, clients(kafka_clusters, topology))  # the same copy job as the level DAGs, in process
    return CONSUMED


def committed(bootstrap: str, topic: str) -> dict[int, int]:
    """The group's committed offsets on one cluster (``Consumer.committed``: an OffsetFetch, no join)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    try:
        tps = consumer.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=30)
    finally:
        consumer.close()
    return {tp.partition: tp.offset for tp in tps if tp.offset >= 0}


# Argument order matters: standalone boots while the group is prepared and the topic mirrored.
def test_failover_form_moves_the_group_from_the_ui(standalone_launched, consumed_group, airflow_standalone: Standalone,
                                                    failover_topic, kafka_clusters, ui_page, tmp_path):
    topic = failover_topic
    ui = AirflowUI(ui_page, airflow_standalone.base)
    started = time.monotonic()

    ui.log_in(airflow_standalone.user, airflow_standalone.password)
    ui.open_dag(DAG_ID)
    form = ui.open_trigger_form(DAG_ID)
    assert form.options("from_cluster") == list(CLUSTERS)
    assert form.options("to_cluster") == list(CLUSTERS)
    form.fill_list("groups", [GROUP])
    form.choose("from_cluster", "c1")
    form.choose("to_cluster", "c2")
    form.choose("mode", "planned")
    form.choose("precision", "exact")
    form.switch("dry_run", False)
    form.switch("force", False)
    form.unpause_on_trigger(True)
    ui.screenshot(tmp_path / "form.png")
    dag_id, run_id = form.trigger()
    assert dag_id == DAG_ID

    state = ui.wait_for_run_state(RUN_TIMEOUT)
    # The task table may stop refreshing with the header (it showed "Running" under a "Success" header):
    # reload the run page, so the table and the screenshot show the final states.
    ui.page.reload()
    assert ui.wait_for_run_state(60) == state
    ui.screenshot(tmp_path / "run.png")
    assert state == "success", (
        f"run {run_id} ended {state!r} in the UI after {time.monotonic() - started:.0f}s; task logs:\n"
        + airflow_standalone.task_logs(DAG_ID, run_id) + "\n" + airflow_standalone.logged_errors())
    tasks = airflow_standalone.task_instances(DAG_ID, run_id)
    assert ui.task_states(len(tasks)) == ["success"] * len(tasks)

    # The UI showed it; the REST API agrees, with the form's values as the run's conf.
    run = next(r for r in airflow_standalone.dag_runs(DAG_ID) if r["dag_run_id"] == run_id)
    assert run["state"] == "success"
    assert {t["state"] for t in tasks} == {"success"}, tasks
    conf = run["conf"]
    assert (conf["groups"], conf["from_cluster"], conf["to_cluster"]) == ([GROUP], "c1", "c2")
    assert (conf["mode"], conf["precision"], conf["dry_run"], conf["force"]) == ("planned", "exact", False, False)

    # The group now stands on c2 where it stood on c1: before the first message it had not consumed.
    on_c2 = read_all(kafka_clusters["c2"].bootstrap, topic, PARTITIONS)
    expected = {}
    for p, n in consumed_group.items():
        values = [r for r in on_c2 if r.partition == p]
        nxt = next(r for r in values if r.value == f"c1|{p}|{n:04d}".encode())
        expected[p] = nxt.offset
    assert committed(kafka_clusters["c2"].bootstrap, topic) == expected == consumed_group
