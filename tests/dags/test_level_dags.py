"""mirror_level_<L> DAGs under Airflow's own dag.test(), on real clusters, with real traffic, on each kind of Spark."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from datetime import UTC
from pathlib import Path

import pytest
from confluent_kafka import KafkaError

from mirrorflow import copyflags, provenance
from mirrorflow.cluster_sync import with_headroom
from mirrorflow_airflow.factories.levels import build_level_dags
from tests.dags.dag_runs import asset_events, run_until_quiescent, task_state, xcom
from tests.fixtures.spark import connect_connection
from tests.integration.kafka_io import produce, read_all
from tests.integration.mirroring import FOUR, assert_exactly_once, partitions_of, topic_everywhere, topology, traffic
from tests.integration.record_size import AT_LIMIT, LIMIT, produce_large
from tests.integration.topic_configs import alter, explicit_configs

pytestmark = [pytest.mark.airflow, pytest.mark.kafka]


SECRET = "s3cr3t-never-in-a-log"
JAVA = Path(__file__).parents[1] / "integration" / "java" / "ProduceAt.java"
OTHERS = ("c2", "c3", "c4")
DAYS_90 = "7776000000"
_pause = threading.Event()  # never set: .wait(t) paces a watch loop


@pytest.mark.usefixtures("spark_default_connect")
def test_level_dags_mirror_real_traffic_on_the_four_cluster_tree_exactly_once(
        airflow_home, kafka_clusters, kafka_distribution, make_topic, monkeypatch, caplog, capfd):
    """The four-cluster tree through ``mirror_level_1`` and ``mirror_level_3`` (on the Spark Connect server: the
    level DAG on ``spark-submit`` is the subject of the standalone-cluster test below, the onboarding killed
    mid-backfill and the secured story), with what applications really write:

    - ``orders`` from c1 and c3, reaching c2, which a connection names (with credentials that never reach a log);
    - a topic an application derives on c2 from mirrored records, forwarding their headers (Kafka Streams does):
      fresh data of c2, so it reaches every cluster once, and the mirrored topic still never loops;
    - a 2 MB record and one at exactly its topic's 5 MiB limit: the level runs create the topic elsewhere with
      room for the copy's headers, and both arrive;
    - a compacted topic with updates and tombstones: the tombstones travel, and the latest value of every key is
      the same on every cluster;
    - timestamps as applications write them (an old CreateTime, none at all, and 0, which librdkafka can only
      write as 1 ms: counted as ``retimed``).
    """
    from mirrorflow.topology import Topology

    c1 = kafka_clusters["c1"].bootstrap
    orders = make_topic("c1", partitions=2)
    make_topic("c3", partitions=2, name=orders)
    raw = topic_everywhere(make_topic, partitions=2)
    derived = topic_everywhere(make_topic, partitions=2)
    large = make_topic("c1", config={"max.message.bytes": str(LIMIT)})
    compacted = make_topic("c1", config={"cleanup.policy": "compact"})
    stamps = make_topic("c1", config={"retention.ms": "-1"})  # its CreateTimes are years old; so is its copies'
    data = topology(kafka_clusters, FOUR, [orders, raw, derived, large, compacted, stamps]).to_dict()
    data["clusters"]["c2"] = {"conn_id": "mf_test_c2"}
    topo = Topology.parse(data)
    # Its credentials (unused by a plaintext broker, but real client settings) must never be logged.
    monkeypatch.setenv("AIRFLOW_CONN_MF_TEST_C2", json.dumps({"conn_type": "kafka", "extra": {
        "bootstrap.servers": kafka_clusters["c2"].bootstrap, "sasl.username": "mirror", "sasl.password": SECRET}}))

    expected_orders = traffic(kafka_clusters, "c1", orders, 25) + traffic(kafka_clusters, "c3", orders, 25)
    expected_raw = traffic(kafka_clusters, "c1", raw, 30) + traffic(kafka_clusters, "c3", raw, 20)
    too_large = produce_large(c1, large, b"x" * (AT_LIMIT + 1))
    assert too_large is not None and too_large.code() == KafkaError.MSG_SIZE_TOO_LARGE  # AT_LIMIT is the limit
    assert produce_large(c1, large, b"m" * 2_000_000) is None
    assert produce_large(c1, large, b"e" * AT_LIMIT) is None
    updates = [(f"k{i % 4}".encode(), f"v{i}".encode(), None, None) for i in range(12)]
    updates += [(b"k1", None, None, None), (b"k3", None, None, None), (b"k3", b"back", None, None)]  # tombstones
    produce(c1, compacted, updates, partition=0)
    subprocess.run(["java", "-cp", kafka_distribution.classpath, str(JAVA), c1, stamps, "0",
                    "0:zero", "1:one", "1714608000000:may"], check=True, timeout=120, capture_output=True)
    produce(c1, stamps, [(None, b"none", None, -1)], partition=0)  # no timestamp at all (-1)

    dags = build_level_dags(topo)
    assert set(dags) == {"mirror_level_1", "mirror_level_3"}
    run = dags["mirror_level_1"].test()  # c1's raw reaches c2, the application's input
    first = xcom(run, "copy")
    assert run.state == "success" and first["level"] == 1 and first["ok"] and first["errors"] == [], first
    by_link = {link["link"]: link for link in first["links"]}
    assert by_link["c1.L1"]["target"] == "c2"
    assert sorted(by_link["c1.L1"]["created_topics"]) == sorted([orders, large, compacted, stamps])  # source's shape
    expected_derived = _derive_on_c2(kafka_clusters, raw, derived)
    # The topics made by hand on c3 and c4 are first seen by the config sync now: reported only, their baseline
    assert dags["mirror_level_3"].test().state == "success"
    # Topic configs follow their owner, c1 (the first cluster listed): a retention and a record-size change there
    # reach every cluster in one run of each level (a shorter retention too: the followers held the owner's
    # previous value), a cluster-owned setting stays behind, and a value changed on c3 is overwritten by the
    # owner's (which leaves retention to its broker, a longer one); c4's own 90 days are never shortened
    alter(kafka_clusters["c1"], orders, retention_ms="7200000", max_message_bytes="2097152", min_insync_replicas="1")
    alter(kafka_clusters["c3"], raw, retention_ms="120000")
    alter(kafka_clusters["c4"], raw, retention_ms=DAYS_90)
    declined = []
    for level in topo.levels:
        run = dags[f"mirror_level_{level}"].test()
        assert run.state == "success"
        declined += [d for link in xcom(run, "copy")["links"] for d in link["declined"]]
    assert {(d["area"], d["cluster"], d["subject"], d["action"], d["allow"]) for d in declined} == {
        ("topic_configs", "c4", f"{raw} retention.ms", "remove retention.ms",
         "topic_configs.allow_keeping_less: [retention.ms]")}, declined
    owned = {"retention.ms": "7200000", "max.message.bytes": str(with_headroom(2097152))}

    def configs_follow_the_owner() -> None:
        assert _configs(kafka_clusters["c1"], orders) == {**owned, "max.message.bytes": "2097152",
                                                         "min.insync.replicas": "1"}  # never changed back
        for name in OTHERS:
            assert _configs(kafka_clusters[name], orders) == owned, name
        assert "retention.ms" not in _configs(kafka_clusters["c3"], raw)
        assert _configs(kafka_clusters["c4"], raw)["retention.ms"] == DAYS_90

    configs_follow_the_owner()
    run_until_quiescent(dags, topo.levels)
    configs_follow_the_owner()  # and they stay: nothing flips back over the following rounds
    assert _configs(kafka_clusters["c4"], raw)["retention.ms"] == DAYS_90  # declined every round, kept
    # with the topology's permission in so many words, the same change is made
    data["topic_configs"] = {"allow_keeping_less": ["retention.ms"]}
    assert build_level_dags(Topology.parse(data))["mirror_level_1"].test().state == "success"  # c3.L1 -> c4
    assert "retention.ms" not in _configs(kafka_clusters["c4"], raw)

    assert_exactly_once(kafka_clusters, topo.leaves, orders, expected_orders)
    # derived: to c1, c3 and c4; raw: c1's 30 to c3 and c4, c3's 20 to c1 and c2, and never back
    assert_exactly_once(kafka_clusters, topo.leaves, derived, expected_derived)
    assert_exactly_once(kafka_clusters, topo.leaves, raw, expected_raw)
    for record in read_all(kafka_clusters["c4"].bootstrap, derived, 2):  # a fresh stamp: c2 is where it began
        origin = provenance.find(list(record.headers), derived, record.partition)
        assert origin is not None and (origin.cluster, origin.topic) == ("c2", derived)
        assert [k for k, _ in record.headers].count(provenance.HEADER) == 1
    # created elsewhere with the headers' headroom; both large records arrive whole
    for name in OTHERS:
        assert partitions_of(kafka_clusters, name, large) == 1
        got = read_all(kafka_clusters[name].bootstrap, large, 1)
        assert [(len(r.value), r.value[:1]) for r in got] == [(2_000_000, b"m"), (AT_LIMIT, b"e")], name
    # tombstones travel; the latest value of every key is the same everywhere
    latest = {}
    for key, value, _, _ in updates:
        latest[key] = value
    for name in OTHERS:
        got = read_all(kafka_clusters[name].bootstrap, compacted, 1)
        assert [r.value for r in got if r.value is None] == [None, None], name
        assert {r.key: r.value for r in got} == latest, name
    # every timestamp as written, but CreateTime 0, which is copied at 1 ms and counted
    for name in OTHERS:
        got = [(r.value, r.timestamp) for r in read_all(kafka_clusters[name].bootstrap, stamps, 1)]
        assert got == [(b"zero", 1), (b"one", 1), (b"may", 1714608000000), (b"none", -1)], name

    output = caplog.text + "".join(capfd.readouterr())
    assert SECRET not in output
    retimed = {line["link"]["id"]: line["retimed"] for line in _audit_lines(output, "copy")
               if line["topic"] == stamps and line["copied"]}
    assert retimed == {"c1.L1": 1, "c1.L3": 1, "c3.L1": 0}, retimed  # c3's copy already says 1 ms
    changes = {(line["cluster"], change["key"]): (change["old"], change["new"])
               for line in _audit_lines(output, "topic_config_align") if line["topic"] == orders
               and line.get("owner") == "c1" for change in line["changes"]}
    assert {k: v for k, v in changes.items() if k[1] == "retention.ms"} == {
        (name, "retention.ms"): (None, "7200000") for name in OTHERS}  # each change audited, old and new values


def _configs(cluster, topic: str) -> dict[str, str]:
    return {k: v for k, v in explicit_configs(cluster, topic).items()
            if k in ("retention.ms", "max.message.bytes", "min.insync.replicas")}


def _audit_lines(output: str, event: str) -> list[dict]:
    return [json.loads(line[line.index("{"):line.rindex("}") + 1]) for line in output.splitlines()
            if '"audit":"mirrorflow"' in line and f'"event":"{event}"' in line]


def _derive_on_c2(kafka_clusters, raw, derived):
    """The application on c2: one derived record per mirrored input, its headers forwarded; returns the ids."""
    inputs = read_all(kafka_clusters["c2"].bootstrap, raw, 2)
    assert len(inputs) == 30 and all(copyflags.read_flags(list(r.headers))[0] for r in inputs)  # copies, all
    ids, same_partition = [], 0
    by_partition: dict[int, list] = {0: [], 1: []}
    for i, r in enumerate(inputs):
        value = f"c2|c2-k{i % 5}|{i:06d}"
        ids.append(value)
        partition = i % 5 % 2  # by key; some land in their input's partition number: that proves nothing either
        same_partition += partition == r.partition
        by_partition[partition].append((r.key, value.encode(), list(r.headers), r.timestamp))
    assert 0 < same_partition < len(inputs)
    for partition, records in by_partition.items():
        produce(kafka_clusters["c2"].bootstrap, derived, records, partition=partition)
    return ids


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
    assert states == {"copy": "skipped", "announce": "skipped"}
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
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", connect_connection(spark_connect_server))
    topic = make_topic("c1", partitions=2)
    topo = topology(kafka_clusters, FOUR, [topic])
    expected = traffic(kafka_clusters, "c1", topic, 30)

    run = build_level_dags(topo)["mirror_level_1"].test()
    summary = xcom(run, "copy")
    assert run.state == "success", summary
    assert {l["link"]: l["copied"] for l in summary["links"]}["c1.L1"] == 30
    assert summary["spark_tasks"] >= 1
    assert_exactly_once(kafka_clusters, ["c2"], topic, expected)
    # what arrived is an asset event: the Kafka provider's URI of the topic on c2, and how far it reaches;
    # new to Airflow, so ``announce`` emits it (one such task at a time: two tasks creating it at once fail one)
    uri = f"kafka://{kafka_clusters['c2'].bootstrap}/{topic}"
    assert summary["arrived"] == [uri] and [h["uri"] for h in summary["announce"]] == [uri]
    [(key, extra, by_task)] = asset_events(uri, run, by_task=True)
    assert by_task == "announce" and task_state(run, "announce") == "success"
    assert key is None and extra["records"] == 30 and extra["links"] == ["c1.L1"] and extra["run_id"] == run.run_id
    assert sorted(extra["partitions"]) == ["0", "1"]
    assert sum(p["source_offset"] for p in extra["partitions"].values()) == 30
    assert all(p["newest_ms"] > 0 and p["target_offset"] >= p["source_offset"] for p in extra["partitions"].values())
    # known now: the next run's copy emits it itself, and skips ``announce`` without starting it
    traffic(kafka_clusters, "c1", topic, 5, start=30)
    again = build_level_dags(topo)["mirror_level_1"].test()
    assert xcom(again, "copy")["announce"] == [] and task_state(again, "announce") == "skipped"
    [(_, extra, by_task)] = asset_events(uri, again, by_task=True)
    assert by_task == "copy" and extra["records"] == 5 and again.state == "success"
    assert f"running on the Spark Connect server sc://127.0.0.1:{spark_connect_server.port}" in caplog.text
    audit = [json.loads(r.getMessage()) for r in caplog.records if r.name == "mirrorflow.audit"]
    assert sum(a["copied"] for a in audit if a["event"] == "copy") == 35  # the audit lines (both runs) are in the task log
    assert "spark_submit" not in caplog.text


@pytest.mark.usefixtures("spark_default_connect")
def test_a_log_start_moved_past_a_running_level_run_fails_it_by_name_never_green_with_a_hole(
        airflow_home, kafka_clusters, make_topic, caplog, capfd):
    """Retention racing a throttled copy (case 2): the run fails naming the range, the copies stop before it."""
    from mirrorflow.topology import Topology
    from tests.integration.retention_gap import CUT, RECORDS, SMALL_PREFETCH, checkpoint_of, fill_source, values_of

    topic = make_topic("c1")
    make_topic("c2", name=topic)
    c1, c2 = kafka_clusters["c1"].bootstrap, kafka_clusters["c2"].bootstrap
    fill_source(c1, topic, 0)
    data = topology(kafka_clusters, "\n  level: 1\n  children: [c1, c2]\n", [topic], names=("c1", "c2"), extra="""
replication: {defaults: {max_bytes_per_second: 1500000, txn_records: 500, on_gap: fail}}
""").to_dict()
    data["clusters"]["c1"]["config"] = SMALL_PREFETCH  # a reader that holds little ahead of its position
    dag = build_level_dags(Topology.parse(data))["mirror_level_1"]
    for t in dag.tasks:  # production retries; here one attempt shows the failure
        t.retries = 0

    cut = threading.Thread(target=_cut_when_copying, args=(c1, c2, topic), daemon=True)
    cut.start()
    run = dag.test()
    cut.join(5)
    assert not cut.is_alive()
    summary = xcom(run, "copy")
    assert run.state == "failed", summary
    [error] = summary["errors"]
    first = int(error.split("retention gap: offsets ")[1].split("..")[0])
    assert 2000 <= first < CUT, error
    assert f"offsets {first}..{CUT - 1} ({CUT - first}) are no longer on c1 and were never copied" in error
    assert "on_gap: fail" in error and "c1.L1" in error and topic in error
    assert values_of(c2, topic, 1, 0) == list(range(first))  # everything read before the cut, once, nothing after
    assert checkpoint_of(c2, topic, 0) == first and RECORDS > CUT
    gaps = _audit_lines(caplog.text + "".join(capfd.readouterr()), "gap")
    assert [(g["lost_offsets"], g["found"]) for g in gaps] == [([first, CUT - 1], "while copying")], gaps


def _cut_when_copying(c1, c2, topic):
    """Once c2 holds 2,000 copies, delete c1's records below CUT (as retention would)."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    from tests.integration.retention_gap import CUT, target_end

    deadline = time.monotonic() + 120
    while target_end(c2, topic, 0) < 2000:
        assert time.monotonic() < deadline, "the copy never got going"
        _pause.wait(0.05)
    admin = AdminClient({"bootstrap.servers": c1})
    for future in admin.delete_records([TopicPartition(topic, 0, CUT)], request_timeout=30).values():
        assert future.result(timeout=30).low_watermark == CUT
