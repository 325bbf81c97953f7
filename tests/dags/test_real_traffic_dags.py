"""Real traffic that stalls or breaks one part of a link, through the level DAG under dag.test() (real brokers).

Each test runs ``mirror_level_1`` on the session's Spark Connect server, as a
scheduler would run it:

- an open transaction on the source holds the link back: the copy does not pass
  it, and ``mirror_lag_monitor`` fails its SLA naming the partition and the
  transaction;
- a target partition without a leader (a three-node target, one node stopped)
  fails alone: the rest of its transaction group copies in the same run;
- a target topic deleted during a throttled copy, on a broker that creates
  topics on demand: the copier creates nothing, the run names the partition, and
  the next run creates the topic in the source's shape and refills it once;
- a compacted topic, compacted on its own schedule on each cluster while the
  level runs copy and ``mirror_audit`` judges window after window: no false
  alarm, tombstones travel, and a real loss is still named.

In the first three the reverse link of the pair is kept outside its replication
window, so each run is about the one link the test watches.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType

from mirrorflow import provenance
from mirrorflow.copy.txn_groups import TXN_GROUPS
from mirrorflow.topology import parse_topology
from mirrorflow_airflow.factories.levels import build_level_dags
from mirrorflow_dev.kafka import LocalKafka
from tests.dags.dag_runs import level_1_dag, one_way_pair, xcom
from tests.fixtures.kafka import TEST_BROKERS, _runs_root
from tests.integration.kafka_io import produce, read_all

pytestmark = [pytest.mark.airflow, pytest.mark.kafka, pytest.mark.usefixtures("spark_default_connect")]

HOUR_MS = 3600_000
_pause = threading.Event()  # never set: .wait(t) paces the watch loops, each with a deadline


# --------------------------------------------------------------------------- an open transaction


def test_records_behind_an_open_transaction_are_lag_and_the_lag_monitor_names_the_transaction(
        airflow_home, kafka_clusters, make_topic):
    from mirrorflow_airflow.factories.lag_monitor import build_lag_monitor_dag
    from mirrorflow_airflow.state import read_lag_snapshot

    topic = make_topic("c1", partitions=1)
    make_topic("c2", partitions=1, name=topic)
    c1, c2 = kafka_clusters["c1"].bootstrap, kafka_clusters["c2"].bootstrap
    text = one_way_pair(c1, c2, "c2", topic, extra="lag: {sla: {records: 100}}\n")
    level = level_1_dag(text)
    opened_ms = int(time.time() * 1000) - HOUR_MS  # the transaction's first record: an hour old
    hung = Producer({"bootstrap.servers": c1, "transactional.id": f"hung-{topic}", "transaction.timeout.ms": 900000})
    hung.init_transactions(30)
    hung.begin_transaction()
    hung.produce(topic, b"in the open transaction", partition=0, timestamp=opened_ms)
    hung.flush(30)  # written, never committed: the partition's last stable offset stays at 0
    try:
        produce(c1, topic, [(None, f"after-{i}".encode(), None, None) for i in range(1000)], partition=0)

        run = level.test()
        summary = xcom(run, "copy")
        assert run.state == "success" and summary["copied"] == 0, summary  # nothing passes the open transaction

        watched = build_lag_monitor_dag(parse_topology(text, source="test")).test()
        assert watched.state == "failed"
        snapshot = read_lag_snapshot("")
        [row] = [r for r in snapshot["links"] if (r["link_id"], r["topic"]) == ("c1.L1", topic)]
        assert (row["records"], row["end"], row["high"], row["held"]) == (1001, 0, 1001, 1001), row
        assert abs(row["open_transaction_s"] - 3600) < 60 and abs(row["seconds"] - 3600) < 60, row
        said = (f"1001 records wait behind a transaction open for {row['open_transaction_s']:g}s on c1 at offset 0: "
                f"no copy passes it until its producer commits or aborts it (or transaction.timeout.ms aborts it)")
        assert said in row["note"]
        assert f"link c1.L1 (c1 -> c2) {topic}[0]: 1001 records > 100; {said}" in snapshot["violations"]
    finally:
        hung.abort_transaction(30)
    again = level.test()  # the transaction aborted: the 1000 behind it go across
    assert again.state == "success" and xcom(again, "copy")["copied"] == 1000


# --------------------------------------------------------------------------- a target partition without a leader


def test_a_target_partition_without_a_leader_fails_alone_and_the_rest_of_its_group_copies(
        airflow_home, kafka_clusters, make_topic, three_nodes):
    """Two ways to meet it: a partition the link copied before (its copy finds no leader) and one it has never
    copied (its plan must first read the target for copies of a lost checkpoint, and cannot)."""
    bootstrap = ",".join(n.bootstrap for n in three_nodes)
    partitions = TXN_GROUPS + 1  # 0 and TXN_GROUPS share transaction group 0
    copied, new = make_topic("c1", partitions=partitions), make_topic("c1", partitions=partitions)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    # partition 0 on node 1, partition TXN_GROUPS on node 2, the rest anywhere but node 2
    assignment = [[1], [3], [1], [3], [2]][:partitions] if partitions == 5 else None
    assert assignment is not None, "the test's assignment is written for four transaction groups"
    for future in admin.create_topics([NewTopic(t, num_partitions=len(assignment), replica_assignment=assignment)
                                       for t in (copied, new)]).values():
        future.result(timeout=30)
    c1 = kafka_clusters["c1"].bootstrap
    level = level_1_dag(one_way_pair(c1, bootstrap, "three", f"{copied}|{new}"))

    def batch(topic: str, p: int, first: int) -> None:
        produce(c1, topic, [(b"k", f"{p}-{i}".encode(), None, None) for i in range(first, first + 50)], partition=p)

    for p in (0, TXN_GROUPS):
        batch(copied, p, 0)
    batch(new, 0, 0)  # its partition TXN_GROUPS stays empty: no checkpoint there yet
    first = level.test()
    assert first.state == "success" and xcom(first, "copy")["copied"] == 150, xcom(first, "copy")
    for p in (0, TXN_GROUPS):
        batch(copied, p, 50)
        batch(new, p, 50)

    three_nodes[1].stop()  # node 2: partition TXN_GROUPS of both topics has no leader now
    deadline = time.monotonic() + 60
    while any(admin.list_topics(t, timeout=10).topics[t].partitions[TXN_GROUPS].leader != -1 for t in (copied, new)):
        assert time.monotonic() < deadline, "the controller never took the leader away"
        _pause.wait(0.2)

    run = level.test()
    summary = xcom(run, "copy")
    assert run.state == "failed", summary
    assert sorted(summary["errors"]) == sorted([
        f"c1.L1 (c1 -> three) {copied}[{TXN_GROUPS}]: three {copied}[{TXN_GROUPS}] has no leader (its broker is "
        f"down?): not copied in this run, nothing written; the other partitions of its transaction group copy on",
        f"c1.L1 (c1 -> three) {new}[{TXN_GROUPS}]: three {new}[{TXN_GROUPS}] could not be read to learn whether it "
        f"already holds copies of the partition: it has no leader (its broker is down?); not copied in this run, "
        f"nothing written; the link's other partitions copy on",
    ]), summary["errors"]
    assert summary["copied"] == 100  # partition 0 of each topic: the rest of their transaction groups
    for topic in (copied, new):
        values = [r.value.decode() for r in read_all(bootstrap, topic, 1) if r.partition == 0]
        assert values == [f"0-{i}" for i in range(100)], topic


# --------------------------------------------------------------------------- a target topic deleted mid-copy

RECORDS = 6000


@pytest.fixture(scope="module")
def auto_create(kafka_distribution):
    """A one-broker cluster with ``auto.create.topics.enable=true``, for this module only."""
    run_dir = Path(_runs_root()) / f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-auto" / "kafka"
    config = {**TEST_BROKERS["broker_config"], "auto.create.topics.enable": "true"}
    kafka = LocalKafka(run_dir, names=["auto"], distribution=kafka_distribution, owner_pid=os.getpid(),
                       broker_config=config, jvm_options=TEST_BROKERS["jvm_options"])
    with kafka:
        yield kafka["auto"]


def _topics(bootstrap):
    return set(AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics)


def _target_end(bootstrap, topic):
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic=topic, timeout=10).topics.get(topic)
    if md is None or md.error is not None:
        return 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "test-watch"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10, cached=False)[1]
    finally:
        consumer.close()


def _delete_when_copying(target: str, topic: str, deleted: threading.Event) -> None:
    """Once the target holds 500 of the run's copies, delete its topic (as an operator might, by mistake)."""
    deadline = time.monotonic() + 120
    while _target_end(target, topic) < RECORDS + 500:
        assert time.monotonic() < deadline, "the copy never got going"
        _pause.wait(0.05)
    admin = AdminClient({"bootstrap.servers": target})  # referenced: a collected client cancels its futures
    for future in admin.delete_topics([topic], operation_timeout=30).values():
        future.result(timeout=30)
    deleted.set()


def test_a_target_topic_deleted_mid_copy_is_named_never_auto_created_and_refilled_once(
        airflow_home, kafka_clusters, make_topic, auto_create):
    c1, target = kafka_clusters["c1"].bootstrap, auto_create.bootstrap
    topic = make_topic("c1", partitions=1, config={"cleanup.policy": "compact", "min.compaction.lag.ms": "3600000"})
    produce(c1, topic, [(f"k{i}".encode(), f"{i:06d}".encode() + b"x" * 1000, None, None) for i in range(RECORDS)],
            partition=0)
    level = level_1_dag(one_way_pair(c1, target, "auto", topic))
    throttled = level_1_dag(one_way_pair(c1, target, "auto", topic, defaults="{max_bytes_per_second: 1000000}"))
    first = level.test()  # creates the topic, as compacted
    assert first.state == "success" and xcom(first, "copy")["copied"] == RECORDS
    produce(c1, topic, [(f"k{i}".encode(), f"{i:06d}".encode() + b"y" * 1000, None, None) for i in range(RECORDS)],
            partition=0)

    deleted = threading.Event()
    cut = threading.Thread(target=_delete_when_copying, args=(target, topic, deleted), daemon=True)
    cut.start()
    run = throttled.test()
    cut.join(5)
    assert deleted.is_set(), "the topic was not deleted during the run"
    summary = xcom(run, "copy")
    assert run.state == "failed", summary
    [error] = summary["errors"]
    assert topic in error and "auto" in error, error
    assert topic not in _topics(target), "the copier's producer created the deleted topic"

    again = level.test()
    assert again.state == "success", xcom(again, "copy")
    values = [r.value[:7] for r in read_all(target, topic, 1)]
    assert values == [f"{i:06d}".encode() + b"x" for i in range(RECORDS)] + [
        f"{i:06d}".encode() + b"y" for i in range(RECORDS)]
    admin = AdminClient({"bootstrap.servers": target})
    [entries] = [f.result(timeout=30) for f in admin.describe_configs(
        [ConfigResource(ResourceType.TOPIC, topic)]).values()]
    assert entries["cleanup.policy"].value == "compact"  # the source's shape, not the broker's defaults


# --------------------------------------------------------------------------- a compacted topic, audited

# compact,delete: compacted, and delete_records allowed (how the test makes a real loss on c2);
# retention far longer than the test
LAZY = {"cleanup.policy": "compact,delete", "retention.ms": "-1"}
EAGER = {**LAZY, "segment.ms": "100", "min.cleanable.dirty.ratio": "0.01", "min.compaction.lag.ms": "0"}
KEYS = 20


def _updates(n: int, start: int, at_ms: int, partition: int, tombstones: set[int] = frozenset()) -> list[tuple]:
    """``n`` updates of KEYS keys in one partition, each an update of its key; ``tombstones``: indexes deleted."""
    return [(f"p{partition}-k{i % KEYS}".encode(), None if i in tombstones else f"c1|{i}".encode(), None,
             at_ms + i) for i in range(start, start + n)]


def _latest(bootstrap: str, topic: str) -> dict[tuple[int, bytes], bytes | None]:
    """(partition, key) -> the value of its last record (``None``: a tombstone)."""
    out: dict[tuple[int, bytes], bytes | None] = {}
    for r in read_all(bootstrap, topic, 2):
        out[(r.partition, r.key)] = r.value
    return out


def _roll(bootstrap: str, topic: str) -> None:
    """A record of the cluster's own in each partition: a segment older than ``segment.ms`` rolls at an append."""
    for p in (0, 1):
        produce(bootstrap, topic, [(b"roll", b"roll", None, None)], partition=p)


def _compacted_on(bootstrap: str, topic: str, fewer_than: int, timeout: float = 90.0) -> int:
    """Wait until the cluster holds fewer than ``fewer_than`` records of the topic (its cleaner ran)."""
    deadline = time.monotonic() + timeout
    while (held := len(read_all(bootstrap, topic, 2))) >= fewer_than:
        assert time.monotonic() < deadline, f"the cleaner of {bootstrap} left {held} records in {timeout:.0f}s"
        _roll(bootstrap, topic)
        _pause.wait(1.0)
    return held


@pytest.mark.usefixtures("audit_result_cleared")  # its deliberate loss must not reach a later lag monitor
def test_a_compacted_topic_compacted_on_different_schedules_is_complete_and_a_lost_latest_value_is_named(
        airflow_home, kafka_clusters, make_topic):
    """c1 keeps its segments open for days (its cleaner never gets to them in the test); c2 rolls a segment every
    100 ms and cleans at once. Both hold the same latest value of every key, tombstones included, while c2 holds
    far fewer records: ``mirror_audit`` calls that complete (compaction, not loss) window after window, and still
    names the one record whose key's latest value c2 lost."""
    from mirrorflow.completeness.store import read_state
    from mirrorflow.kafka.config import ClusterClient
    from mirrorflow_airflow.factories.audit import build_audit_dag
    from tests.dags.dag_runs import run_until_quiescent

    topic = make_topic("c1", partitions=2, config=LAZY)
    make_topic("c2", partitions=2, config=EAGER, name=topic)
    c1, c2 = kafka_clusters["c1"].bootstrap, kafka_clusters["c2"].bootstrap
    topo = parse_topology(f"clusters:\n  c1: {{bootstrap: '{c1}'}}\n  c2: {{bootstrap: '{c2}'}}\n"
                          f"tree: {{level: 1, children: [c1, c2]}}\ntopics: ['{topic}']\n"
                          f"audit: {{window_minutes: 1, grace_minutes: 0}}\n"
                          # each cluster keeps its own compaction schedule (docs/topics.md, "Configs kept in sync")
                          "topic_configs: {exclude: [segment.ms, min.cleanable.dirty.ratio, min.compaction.lag.ms]}\n",
                          source="test")
    levels = build_level_dags(topo)
    audit = build_audit_dag(topo)
    hour_ago = int(time.time() * 1000) - 3_600_000  # final windows: an hour old (copies keep the timestamp)

    def converge() -> None:
        run_until_quiescent(levels, [1])

    # window after window: 600 updates of 20 keys per partition, a few of them tombstones
    sent = 0
    for round_ in range(2):
        at = hour_ago + round_ * 120_000
        for p in (0, 1):
            produce(c1, topic, _updates(600, 0, at, p, tombstones={581, 597}), partition=p)
        sent += 1200
        converge()
        held = _compacted_on(c2, topic, fewer_than=sent // 2)
        converge()  # c2's own records (what rolled its segments) reach c1 too
        print(f"round {round_}: c1 holds {len(read_all(c1, topic, 2))} records, c2 {held} after compaction")
        run = audit.test()
        summary = xcom(run, "count")
        assert run.state == "success", summary
        assert summary["compacted"] > 0 and summary["complete"] == summary["judged"] > 0, summary

    # the latest value of every key is the same on both clusters, tombstones included (they travelled)
    latest = _latest(c1, topic)
    assert _latest(c2, topic) == latest
    assert {k for k, v in latest.items() if v is None} == {(p, f"p{p}-k{i % KEYS}".encode()) for p in (0, 1)
                                                           for i in (581, 597)}
    # the verdicts say why the windows are complete
    kept = {k: v for k, v in read_state(ClusterClient("c2", {"bootstrap.servers": c2}), 60).verdicts.items()
            if k.topic == topic and k.origin == "c1"}
    assert kept and all(v["complete"] for v in kept.values()) and any(v.get("compacted") for v in kept.values())

    # a real loss: a key's only record reaches c2 and is deleted there; every other record before it in its
    # partition is superseded on c2 by later ones (c2's own by one more of its own, which reaches c1), so
    # only that record is c2's loss
    at = hour_ago + 300_000
    produce(c1, topic, [(b"solo", b"c1|solo", None, at)], partition=0)
    produce(c1, topic, _updates(KEYS, 1000, at + 1, 0), partition=0)
    converge()
    [solo] = [r for r in read_all(c2, topic, 2) if r.key == b"solo"]
    origin = provenance.find(list(solo.headers), topic, 0)
    admin = AdminClient({"bootstrap.servers": c2})  # referenced until its futures are done
    for future in admin.delete_records([TopicPartition(topic, 0, solo.offset + 1)], request_timeout=30).values():
        future.result(timeout=30)
    _roll(c2, topic)
    converge()
    lost = audit.test()
    assert lost.state == "failed"
    [difference] = xcom(lost, "count")["differences"]
    assert (difference["cluster"], difference["origin"]) == ("c2", "c1"), difference
    assert (difference["missing_count"], difference["missing"], difference["duplicated_count"],
            difference["unexpected_count"]) == (1, [[0, origin.offset]], 0, 0), difference
