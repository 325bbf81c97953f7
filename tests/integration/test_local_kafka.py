"""The local Kafka launcher against real brokers: independence, transactions, crash and restart, fetch.

No mocks and no sleeps: every wait is a condition with a deadline (delivery reports,
end-of-partition events, offsets answered by the broker).
"""

from __future__ import annotations

import json
import socket
import stat
import subprocess
import sys
import threading
import time
import uuid
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    ConsumerGroupTopicPartitions,
    IsolationLevel,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from mirrorflow_dev.kafka import (
    LOG4J_VERSION,
    SCALA_BINARY,
    SERVER_MAIN,
    STORAGE_TOOL_MAIN,
    BrokerStartError,
    FetchError,
    KafkaDistribution,
    LocalCluster,
    LocalKafka,
    PortInUseError,
    ToolMissingError,
)
from mirrorflow_dev.process import free_port

_pause = threading.Event()  # never set; .wait(t) paces probe loops


@dataclass(frozen=True)
class Record:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]


def produce(bootstrap: str, topic: str, records: list[tuple[bytes, bytes, list[tuple[str, bytes]]]], **conf) -> None:
    """Produce with acks=all and wait for every delivery report; fail on any error."""
    errors: list[KafkaError] = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5, **conf})
    for key, value, headers in records:
        producer.produce(topic, value=value, key=key, headers=headers, on_delivery=lambda err, _msg: err and errors.append(err))
    assert producer.flush(30) == 0, "messages still in flight after 30 s"
    assert not errors, errors


def consume_all(bootstrap: str, topic: str, *, isolation: str = "read_committed", timeout: float = 30.0) -> list[Record]:
    """Everything readable in ``topic`` now: read each partition from the start to its end (EOF)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": isolation,
        }
    )
    try:
        partitions = list(consumer.list_topics(topic, timeout=10).topics[topic].partitions)
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        at_end: set[int] = set()
        out: list[Record] = []
        deadline = time.monotonic() + timeout
        while len(at_end) < len(partitions):
            assert time.monotonic() < deadline, f"{topic}: end not reached in {timeout}s (got {len(out)} records)"
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(msg.partition())
                    continue
                raise KafkaException(msg.error())
            out.append(Record(msg.partition(), msg.offset(), msg.key(), msg.value(), tuple(msg.headers() or ())))
        return out
    finally:
        consumer.close()


def wait_transactions_settled(bootstrap: str, topic: str, partitions: int, timeout: float = 30.0) -> None:
    """Wait until the last stable offset equals the high watermark on every partition.

    ``commit_transaction`` returns once the coordinator logged the decision; the commit/abort
    markers reach the partitions right after. Until they do, read_committed readers stop short.
    """
    admin = AdminClient({"bootstrap.servers": bootstrap})
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    deadline = time.monotonic() + timeout
    while True:
        ends = {}
        for level in (IsolationLevel.READ_UNCOMMITTED, IsolationLevel.READ_COMMITTED):
            futures = admin.list_offsets({tp: OffsetSpec.latest() for tp in tps}, isolation_level=level)
            ends[level] = {tp.partition: f.result(timeout=10).offset for tp, f in futures.items()}
        if ends[IsolationLevel.READ_UNCOMMITTED] == ends[IsolationLevel.READ_COMMITTED]:
            return
        assert time.monotonic() < deadline, f"transactions on {topic} not settled: {ends}"
        _pause.wait(0.05)


def keyed_records(prefix: str, n: int) -> list[tuple[bytes, bytes, list[tuple[str, bytes]]]]:
    return [
        (f"key-{i % 7}".encode(), f"{prefix}-{i}".encode(), [("origin", prefix.encode()), ("seq", str(i).encode())])
        for i in range(n)
    ]


def cluster_id_of(cluster: LocalCluster) -> str:
    admin = AdminClient(cluster.client_config())  # keep a reference: a collected client fails its futures
    return admin.describe_cluster(request_timeout=10).result(timeout=15).cluster_id


def assert_same_records(got: list[Record], sent: list[tuple[bytes, bytes, list[tuple[str, bytes]]]]) -> None:
    assert len(got) == len(sent)
    assert sorted((r.key, r.value, r.headers) for r in got) == sorted((k, v, tuple(h)) for k, v, h in sent)
    # Per partition, the order of production is kept (one producer, idempotent).
    for partition in {r.partition for r in got}:
        seqs = [int(dict(r.headers)["seq"]) for r in sorted(got, key=lambda r: r.offset) if r.partition == partition]
        assert seqs == sorted(seqs)


# --------------------------------------------------------------------------- brokers


@pytest.mark.kafka
def test_two_clusters_are_real_and_independent(kafka_clusters: LocalKafka, make_topic) -> None:
    c1, c2 = kafka_clusters["c1"], kafka_clusters["c2"]
    assert c1.bootstrap != c2.bootstrap

    topic = make_topic(c1, partitions=3)
    on_c1 = keyed_records("c1", 60)
    produce(c1.bootstrap, topic, on_c1)
    assert_same_records(consume_all(c1.bootstrap, topic), on_c1)

    # Different clusters: own ids (as formatted into their data dirs), own topics.
    ids = {name: cluster_id_of(c) for name, c in kafka_clusters.items() if c.is_running()}
    assert len(ids) >= 4 and len(set(ids.values())) == len(ids), ids
    assert ids["c1"] == c1.cluster_id and ids["c2"] == c2.cluster_id
    assert topic not in AdminClient(c2.client_config()).list_topics(timeout=10).topics

    # The same name on c2 is a separate topic with its own data.
    make_topic(c2, partitions=1, name=topic)
    on_c2 = keyed_records("c2", 25)
    produce(c2.bootstrap, topic, on_c2)
    assert_same_records(consume_all(c2.bootstrap, topic), on_c2)
    assert_same_records(consume_all(c1.bootstrap, topic), on_c1)


@pytest.mark.kafka
def test_transaction_with_offsets_is_atomic_and_fences_zombies(kafka_clusters: LocalKafka, make_topic) -> None:
    cluster = kafka_clusters["c3"]
    topic = make_topic(cluster, partitions=2)
    # The link's progress is kept under a partition that exists on this cluster (the group
    # coordinator refuses offsets for unknown partitions).
    progress = make_topic(cluster, partitions=1, name=f"{topic}-progress")
    group = f"{topic}-link"
    group_metadata = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group}).consumer_group_metadata()
    txn_id = f"{topic}-tx"

    producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": txn_id, "linger.ms": 5})
    producer.init_transactions(30)

    def transaction(values: list[str], progress_offset: int, commit: bool) -> None:
        producer.begin_transaction()
        for i, value in enumerate(values):
            producer.produce(topic, key=f"k{i}".encode(), value=value.encode())
        producer.send_offsets_to_transaction([TopicPartition(progress, 0, progress_offset)], group_metadata, 30)
        # Written before the end: an abort purges what is still queued, and then nothing aborted would be in the log
        # (under load, the linger outlasted the offsets' round trip once)
        producer.flush(30)
        producer.commit_transaction(30) if commit else producer.abort_transaction(30)

    transaction([f"first-{i}" for i in range(5)], 5, commit=True)
    transaction([f"aborted-{i}" for i in range(3)], 99, commit=False)
    transaction([f"second-{i}" for i in range(2)], 7, commit=True)

    # A zombie with the same transactional.id: the new instance fences the old one.
    successor = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": txn_id})
    successor.init_transactions(30)
    with pytest.raises(KafkaException):
        producer.begin_transaction()
        producer.produce(topic, key=b"z", value=b"zombie")
        producer.commit_transaction(30)

    wait_transactions_settled(cluster.bootstrap, topic, 2)
    committed = sorted(r.value.decode() for r in consume_all(cluster.bootstrap, topic, isolation="read_committed"))
    assert committed == sorted([f"first-{i}" for i in range(5)] + [f"second-{i}" for i in range(2)])
    everything = [r.value.decode() for r in consume_all(cluster.bootstrap, topic, isolation="read_uncommitted")]
    assert sorted(v for v in everything if v.startswith("aborted")) == [f"aborted-{i}" for i in range(3)]
    assert "zombie" not in everything

    # The group's committed position is the one from the last *committed* transaction.
    admin = AdminClient(cluster.client_config())
    result = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group, [TopicPartition(progress, 0)])])
    offsets = result[group].result(timeout=15).topic_partitions
    assert [(tp.topic, tp.partition, tp.offset) for tp in offsets] == [(progress, 0, 7)]


@pytest.mark.kafka
def test_sigkill_and_restart_keeps_acknowledged_data(kafka_clusters: LocalKafka, make_topic) -> None:
    cluster = kafka_clusters["c4"]
    topic = make_topic(cluster, partitions=2)
    sent = keyed_records("before-crash", 200)
    produce(cluster.bootstrap, topic, sent)  # acks=all, every delivery confirmed
    cluster_id, bootstrap, old_pid = cluster.cluster_id, cluster.bootstrap, cluster.pid

    cluster.kill()
    try:
        assert not cluster.is_running()
        with pytest.raises(KafkaException):
            AdminClient({"bootstrap.servers": bootstrap, "log_level": 0}).list_topics(timeout=1)
        cluster.start()
    finally:
        kafka_clusters.start([cluster.name])  # idempotent: back up even when the test failed before it

    assert cluster.is_running() and cluster.pid != old_pid
    assert (cluster.bootstrap, cluster.cluster_id, cluster_id_of(cluster)) == (bootstrap, cluster_id, cluster_id)
    assert_same_records(consume_all(cluster.bootstrap, topic), sent)
    after = keyed_records("after-restart", 10)
    produce(cluster.bootstrap, topic, after)
    assert len(consume_all(cluster.bootstrap, topic)) == 210


@pytest.mark.kafka
def test_cli_starts_detached_brokers_and_stops_them(tmp_path: Path, kafka_distribution: KafkaDistribution) -> None:
    run_dir = tmp_path / "run"
    cli = [sys.executable, "-m", "mirrorflow_dev.kafka"]
    start = subprocess.run([*cli, "start", "--run-dir", str(run_dir), "--cluster", "solo"], capture_output=True, text=True, timeout=180)
    try:
        assert start.returncode == 0, start.stderr
        name, bootstrap, state, *_ = start.stdout.splitlines()[0].split("\t")
        assert (name, state.split()[0]) == ("solo", "running")
        # The CLI process is gone; the broker it started is not.
        status = subprocess.run([*cli, "status", "--run-dir", str(run_dir), "--json"], capture_output=True, text=True, timeout=60)
        assert status.returncode == 0, status.stdout + status.stderr
        info = json.loads(status.stdout)["solo"]
        assert info["running"] and info["bootstrap"] == bootstrap
        assert AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).brokers
        assert json.loads((run_dir / "state.json").read_text())["owner_pid"] is None

        stop = subprocess.run([*cli, "stop", "--run-dir", str(run_dir)], capture_output=True, text=True, timeout=120)
        assert stop.returncode == 0, stop.stderr
        assert not Path(f"/proc/{info['pid']}").exists() or "kafka" not in Path(f"/proc/{info['pid']}/cmdline").read_text()
        status = subprocess.run([*cli, "status", "--run-dir", str(run_dir)], capture_output=True, text=True, timeout=60)
        assert status.returncode == 1 and "stopped" in status.stdout
    finally:
        if (run_dir / "state.json").exists():
            LocalKafka.open(run_dir, progress=lambda m: None).stop()


@pytest.mark.kafka
def test_a_node_formatted_from_the_template_starts_with_ids_of_its_own(tmp_path: Path,
                                                                       kafka_distribution: KafkaDistribution) -> None:
    """After one ``StorageTool format``, a node of the same Kafka and features is formatted without a JVM."""
    def node(name: str) -> LocalCluster:
        return LocalCluster(name, tmp_path / name, free_port(), free_port(), kafka_distribution,
                            config={"num.io.threads": "2"}, jvm_options=("-XX:TieredStopAtLevel=1",),
                            progress=lambda m: None)

    node("first").prepare()  # formats with the tool, or from the template a session made before
    second = node("second")
    cluster_id = second.prepare()
    meta = (second.data_dir / "meta.properties").read_text()
    assert "as `StorageTool format` would" in meta and f"cluster.id={cluster_id}" in meta
    assert not (second.directory / "format.log").exists()  # no JVM ran for it
    second.start(timeout=90)
    try:
        admin = AdminClient({"bootstrap.servers": second.bootstrap})
        assert admin.describe_cluster(request_timeout=10).result(timeout=15).cluster_id == cluster_id
        topic = f"t-{uuid.uuid4().hex[:8]}"
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=30)
        produce(second.bootstrap, topic, keyed_records("fresh", 5))
        assert len(consume_all(second.bootstrap, topic)) == 5
    finally:
        second.stop()


@pytest.mark.kafka
def test_broker_that_dies_at_start_reports_its_log(tmp_path: Path, kafka_distribution: KafkaDistribution) -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        taken = squatter.getsockname()[1]
        # Through LocalKafka the clash is caught before any JVM starts...
        with pytest.raises(PortInUseError, match=str(taken)):
            LocalKafka(tmp_path / "a", ports={"x": taken}, distribution=kafka_distribution).start()
        # ...a bare cluster launches, the JVM cannot bind and exits: the error carries its log.
        cluster = LocalCluster("x", tmp_path / "b" / "x", taken, free_port(), kafka_distribution, progress=lambda m: None)
        try:
            with pytest.raises(BrokerStartError, match="(?s)exited.*Address already in use") as info:
                cluster.start(timeout=90)
            assert str(cluster.log_path) in str(info.value)
        finally:
            cluster.stop()


@pytest.mark.kafka
def test_real_distribution_is_cached_and_has_the_main_classes(kafka_distribution: KafkaDistribution) -> None:
    # A second fetch must not need Maven at all: point it at a non-existent mvn.
    again = KafkaDistribution.fetch(kafka_distribution.version, mvn="/nonexistent/mvn", progress=lambda m: None)
    assert again == kafka_distribution
    marker = json.loads(kafka_distribution.marker.read_text())
    assert f"kafka_{SCALA_BINARY}-{kafka_distribution.version}.jar" in marker["jars"]
    core = kafka_distribution.libs / f"kafka_{SCALA_BINARY}-{kafka_distribution.version}.jar"
    names = set(zipfile.ZipFile(core).namelist())
    for main_class in (SERVER_MAIN, STORAGE_TOOL_MAIN):
        assert main_class.replace(".", "/") + ".class" in names
    tools = [j for j in kafka_distribution.jars if j.name.startswith("kafka-tools-") and "api" not in j.name]
    assert tools and "org/apache/kafka/tools/ProducerPerformance.class" in zipfile.ZipFile(tools[0]).namelist()
    assert (kafka_distribution.libs / f"log4j-core-{LOG4J_VERSION}.jar").is_file()


# --------------------------------------------------------------------------- fetch logic (no network)


def _fake_mvn(tmp_path: Path, *, fail: bool = False) -> tuple[str, Path]:
    """An executable standing in for mvn: logs each call, 'copies' the two jars fetch checks for."""
    calls = tmp_path / "mvn-calls.log"
    script = tmp_path / "fake-mvn"
    script.write_text(
        "#!/bin/sh\n"
        f'echo "$@" >> "{calls}"\n'
        + ("echo 'Could not resolve dependencies' ; exit 1\n" if fail else "")
        + 'for a in "$@"; do case "$a" in -DoutputDirectory=*) out="${a#-DoutputDirectory=}";; esac; done\n'
        'mkdir -p "$out"\n'
        f'touch "$out/kafka_{SCALA_BINARY}-9.9.9.jar" "$out/log4j-core-{LOG4J_VERSION}.jar" "$out/other-1.0.jar"\n'
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script), calls


def _calls(log: Path) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


def test_fetch_runs_maven_once_then_trusts_the_marker(tmp_path: Path) -> None:
    mvn, calls = _fake_mvn(tmp_path)
    cache = tmp_path / "cache"
    assert KafkaDistribution.cached("9.9.9", cache_root=cache) is None

    first = KafkaDistribution.fetch("9.9.9", cache_root=cache, mvn=mvn, progress=lambda m: None)
    assert _calls(calls) == 1 and first.marker.is_file()
    assert {j.name for j in first.jars} == {f"kafka_{SCALA_BINARY}-9.9.9.jar", f"log4j-core-{LOG4J_VERSION}.jar", "other-1.0.jar"}
    pom = (first.home / "maven" / "pom.xml").read_text()
    assert "<artifactId>kafka_2.13</artifactId><version>9.9.9</version>" in pom and "log4j-slf4j-impl" in pom

    second = KafkaDistribution.fetch("9.9.9", cache_root=cache, mvn=mvn, progress=lambda m: None)
    assert second == first and _calls(calls) == 1
    # Not even the mvn lookup happens when cached.
    assert KafkaDistribution.fetch("9.9.9", cache_root=cache, mvn="/nonexistent/mvn", progress=lambda m: None) == first

    # A jar listed by the marker went missing: the cache is no longer trusted, Maven runs again.
    (first.libs / "other-1.0.jar").unlink()
    KafkaDistribution.fetch("9.9.9", cache_root=cache, mvn=mvn, progress=lambda m: None)
    assert _calls(calls) == 2


def test_failed_fetch_leaves_no_marker_and_says_why(tmp_path: Path) -> None:
    mvn, calls = _fake_mvn(tmp_path, fail=True)
    cache = tmp_path / "cache"
    with pytest.raises(FetchError, match="Could not resolve dependencies"):
        KafkaDistribution.fetch("9.9.9", cache_root=cache, mvn=mvn, progress=lambda m: None)
    assert KafkaDistribution.cached("9.9.9", cache_root=cache) is None
    assert not (cache / "kafka" / "9.9.9" / ".fetched.json").exists()
    with pytest.raises(FetchError):
        KafkaDistribution.fetch("9.9.9", cache_root=cache, mvn=mvn, progress=lambda m: None)
    assert _calls(calls) == 2  # retried, not remembered as done


def test_missing_maven_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ToolMissingError, match="apt-get install maven"):
        KafkaDistribution.fetch("9.9.9", cache_root=tmp_path / "cache", progress=lambda m: None)
