"""The exactly-once partition copier against real brokers: c1 is the source, c2 the target."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter

import pytest
from confluent_kafka import IsolationLevel, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, OffsetSpec

from mirrorflow import copyflags, provenance
from mirrorflow.copy.engine.partition import copy_partition
from mirrorflow.copy.task import PartitionTask
from mirrorflow.kafka.config import ClusterClient
from tests.integration.kafka_io import produce, read_all, stable_end_offsets

pytestmark = pytest.mark.kafka

_pause = threading.Event()


def _clients(kafka_clusters):
    return (ClusterClient("c1", {"bootstrap.servers": kafka_clusters["c1"].bootstrap}),
            ClusterClient("c2", {"bootstrap.servers": kafka_clusters["c2"].bootstrap}))


def _task(topic, partition, end, **kw):
    return PartitionTask(link_id=kw.pop("link_id", "c1.L1"), level=1, source="c1", target="c2",
                         topic=topic, partition=partition, end_offset=end, **kw)


def _records(n, tag="m", size=10):
    # Recent CreateTimes: brokers delete segments older than retention.ms (7 days by default)
    # by record timestamp, so data stamped years ago would vanish from source and target.
    base = int(time.time() * 1000) - 60_000
    return [(f"k{i % 7}".encode(), f"{tag}{i}".encode().ljust(size, b"."), [("app", b"x")], base + i)
            for i in range(n)]


def _topic_pair(make_topic, partitions=1, target_config=None):
    topic = make_topic("c1", partitions=partitions)
    make_topic("c2", partitions=partitions, name=topic, config=target_config)
    return topic


def test_copies_key_value_timestamp_headers_flags_and_origin_once(kafka_clusters, make_topic):
    topic = _topic_pair(make_topic, partitions=3)
    for p in range(3):
        produce(kafka_clusters["c1"].bootstrap, topic, _records(40, tag=f"p{p}-"), partition=p)
    ends = stable_end_offsets(kafka_clusters["c1"].bootstrap, topic, 3)
    src, dst = _clients(kafka_clusters)

    results = [copy_partition(_task(topic, p, ends[p], txn_records=15), src, dst) for p in range(3)]
    assert all(r.ok for r in results), [r.error for r in results]
    assert [(r.copied, r.skipped, r.next_offset) for r in results] == [(40, 0, 40)] * 3
    assert all(r.transactions == 3 for r in results)  # 15 + 15 + 10

    source = read_all(kafka_clusters["c1"].bootstrap, topic, 3)
    target = read_all(kafka_clusters["c2"].bootstrap, topic, 3)
    assert len(target) == 120
    # The audit's target span: from the empty partition's end to the last copy (41: 15 copies,
    # a commit marker, 15, a marker, 10), or to the last commit marker (42) once it is written.
    assert all(r.target_first_offset == 0 and r.target_last_offset in (41, 42) for r in results), results
    assert all(0 <= t.offset <= 42 for t in target)
    for s, t in zip(source, target):
        assert (t.partition, t.key, t.value, t.timestamp) == (s.partition, s.key, s.value, s.timestamp)
        assert t.header("app") == b"x"
        assert t.header(copyflags.HEADER) == b"1"
        assert provenance.decode(t.header(provenance.HEADER)) == provenance.Origin("c1", topic, s.partition, s.offset)

    again = [copy_partition(_task(topic, p, ends[p]), src, dst) for p in range(3)]
    assert [(r.copied, r.start_offset) for r in again] == [(0, 40)] * 3
    assert all(r.target_first_offset is None and r.target_last_offset is None for r in again)
    assert len(read_all(kafka_clusters["c2"].bootstrap, topic, 3)) == 120


def test_skipped_messages_advance_the_checkpoint(kafka_clusters, make_topic):
    topic = _topic_pair(make_topic)
    fresh = _records(5)
    # copies from c9 (a copy's origin names its own topic and partition: mirrorflow.provenance)
    already_at_level_1 = [(k, v, [(copyflags.HEADER, b"1"), (provenance.HEADER, f"c9:{topic}:0:{i}".encode())], ts)
                          for i, (k, v, _, ts) in enumerate(_records(5, tag="s"))]
    copied_at_level_3 = [(k, v, [(copyflags.HEADER, b"4"), (provenance.HEADER, f"c9:{topic}:0:{i}".encode())], ts)
                         for i, (k, v, _, ts) in enumerate(_records(5, tag="t"), start=5)]
    produce(kafka_clusters["c1"].bootstrap, topic, fresh + already_at_level_1 + copied_at_level_3)
    src, dst = _clients(kafka_clusters)
    result = copy_partition(_task(topic, 0, 15), src, dst)
    assert (result.copied, result.skipped, result.next_offset) == (10, 5, 15)
    flags = Counter(r.header(copyflags.HEADER) for r in read_all(kafka_clusters["c2"].bootstrap, topic, 1))
    assert flags == {b"1": 5, b"5": 5}


def test_malformed_flags_are_copied_as_fresh_and_counted(kafka_clusters, make_topic):
    topic = _topic_pair(make_topic)
    produce(kafka_clusters["c1"].bootstrap, topic, [(b"k", b"v", [(copyflags.HEADER, b"x7")], None)])
    src, dst = _clients(kafka_clusters)
    result = copy_partition(_task(topic, 0, 1), src, dst)
    assert (result.copied, result.malformed) == (1, 1)
    [copy] = read_all(kafka_clusters["c2"].bootstrap, topic, 1)
    assert copy.header(copyflags.HEADER) == b"1" and copy.header(copyflags.INVALID_HEADER) == b"x7"


def test_two_attempts_at_once_still_copy_exactly_once(kafka_clusters, make_topic):
    topic = _topic_pair(make_topic)
    produce(kafka_clusters["c1"].bootstrap, topic, _records(3000))
    src, dst = _clients(kafka_clusters)
    results = []
    threads = [threading.Thread(target=lambda: results.append(copy_partition(_task(topic, 0, 3000, txn_records=100), src, dst)))
               for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(180)
    # One attempt may be fenced by the other; then a retry finishes the work.
    if not all(r.ok for r in results):
        assert any(r.fenced for r in results), [r.error for r in results]
        assert copy_partition(_task(topic, 0, 3000), src, dst).ok
    values = Counter(r.value for r in read_all(kafka_clusters["c2"].bootstrap, topic, 1))
    assert len(values) == 3000 and set(values.values()) == {1}


_KILLABLE = """
import sys
from mirrorflow.copy.engine.partition import copy_partition
from mirrorflow.copy.task import PartitionTask
from mirrorflow.kafka.config import ClusterClient
src, dst, topic = sys.argv[1:4]
task = PartitionTask(link_id=sys.argv[5], level=1, source="c1", target="c2", topic=topic, partition=0,
                     end_offset=int(sys.argv[4]), txn_records=200, exactly_once=sys.argv[6] == "eos",
                     max_bytes_per_second=float(sys.argv[7]) if len(sys.argv) > 7 else None)
print(copy_partition(task, ClusterClient("c1", {"bootstrap.servers": src}),
                     ClusterClient("c2", {"bootstrap.servers": dst})))
"""


def _kill_once(proc, reached, timeout: float = 120.0) -> None:
    """SIGKILL ``proc`` as soon as ``reached()`` holds; it must still be running then."""
    deadline = time.monotonic() + timeout
    while not reached():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the copy never got going"
        _pause.wait(0.02)  # poll interval of the condition above (it has a deadline)
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)


def _last_stable_offset(bootstrap, topic):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    tp = TopicPartition(topic, 0)
    return admin.list_offsets({tp: OffsetSpec.latest()}, isolation_level=IsolationLevel.READ_COMMITTED,
                             request_timeout=10)[tp].result().offset


def test_killed_mid_copy_then_rerun_is_exactly_once(kafka_clusters, make_topic):
    topic = _topic_pair(make_topic)
    n = 60000
    produce(kafka_clusters["c1"].bootstrap, topic, _records(n, size=100))
    c1, c2 = kafka_clusters["c1"].bootstrap, kafka_clusters["c2"].bootstrap
    # throttled to about 1 MB/s (a 6 s copy), so that the kill lands in the middle however fast the copier is
    proc = subprocess.Popen([sys.executable, "-c", _KILLABLE, c1, c2, topic, str(n), "c1.L1", "eos", "1000000"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    # Wait until some transactions are committed on the target (its last stable offset
    # moves), then kill. The checkpoint itself is not read here: while the killed
    # producer's transaction is open, a stable read of it blocks until that
    # transaction is fenced, which is exactly what the next attempt does first.
    _kill_once(proc, lambda: _last_stable_offset(c2, topic) >= 1000)

    src, dst = _clients(kafka_clusters)
    result = copy_partition(_task(topic, 0, n), src, dst)
    assert result.ok and 1000 <= result.start_offset < n and result.next_offset == n
    values = Counter(r.value for r in read_all(c2, topic, 1))
    assert len(values) == n and set(values.values()) == {1}


@pytest.mark.parametrize("known_limit", [2000, None], ids=["limit-known", "limit-unknown"])
def test_message_too_large_for_target_stops_at_its_offset_then_completes(kafka_clusters, make_topic, known_limit):
    topic = _topic_pair(make_topic, target_config={"max.message.bytes": "2000"})
    records = _records(20)
    records[10] = (b"big", random.Random(10).randbytes(5000), None, None)  # too large even compressed
    produce(kafka_clusters["c1"].bootstrap, topic, records)
    src, dst = _clients(kafka_clusters)

    result = copy_partition(_task(topic, 0, 20, max_message_bytes=known_limit), src, dst)
    assert not result.ok
    assert result.error_offset == 10 and result.next_offset == 10
    assert "MSG_SIZE_TOO_LARGE" in result.error and "10" in result.error
    assert len(read_all(kafka_clusters["c2"].bootstrap, topic, 1)) == 10

    admin = AdminClient({"bootstrap.servers": kafka_clusters["c2"].bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry("max.message.bytes", "100000", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(30)

    retry = copy_partition(_task(topic, 0, 20), src, dst)
    assert retry.ok and (retry.start_offset, retry.copied, retry.next_offset) == (10, 10, 20)
    target = read_all(kafka_clusters["c2"].bootstrap, topic, 1)
    assert [r.value for r in target] == [v for _, v, _, _ in records]


@pytest.mark.parametrize("exactly_once", [True, False], ids=["eos", "alo"])
def test_batches_the_target_refuses_as_too_large_go_through_one_message_at_a_time(kafka_clusters, make_topic,
                                                                                   exactly_once):
    # Every message fits the target's limit, but librdkafka batches them beyond it: the limit
    # is unknown to this copy (no max_message_bytes), so the target refuses whole batches.
    topic = _topic_pair(make_topic, target_config={"max.message.bytes": "2000"})
    records = _records(30, size=600)
    produce(kafka_clusters["c1"].bootstrap, topic, records)
    src, dst = _clients(kafka_clusters)

    result = copy_partition(_task(topic, 0, 30, exactly_once=exactly_once), src, dst)
    assert result.ok, result.error
    assert (result.copied, result.next_offset) == (30, 30)
    target = [r.value for r in read_all(kafka_clusters["c2"].bootstrap, topic, 1)]
    if exactly_once:
        assert target == [v for _, v, _, _ in records]
    else:  # the refused batches were never written: nothing to repeat either
        assert sorted(set(target)) == sorted(v for _, v, _, _ in records) and len(target) == 30


@pytest.mark.parametrize("exactly_once", [True, False], ids=["eos", "alo"])
def test_a_refused_copy_inside_a_batch_is_found_at_its_offset(kafka_clusters, make_topic, exactly_once):
    # A compacted target refuses a record without a key, and with it the whole batch the
    # producer sent it in; the copier reports failures only, so it looks for the message.
    topic = _topic_pair(make_topic, target_config={"cleanup.policy": "compact"})
    records = _records(20)
    records[13] = (None, b"no-key", None, None)
    produce(kafka_clusters["c1"].bootstrap, topic, records)
    src, dst = _clients(kafka_clusters)

    result = copy_partition(_task(topic, 0, 20, exactly_once=exactly_once), src, dst)
    assert not result.ok
    assert (result.error_offset, result.next_offset) == (13, 13), result.error
    assert "source offset 13" in result.error
    target = [r.value for r in read_all(kafka_clusters["c2"].bootstrap, topic, 1)]
    assert set(target) == {v for _, v, _, _ in records[:13]}
    if exactly_once:
        assert len(target) == 13


def test_at_least_once_copies_everything_and_commits_the_checkpoint(kafka_clusters, make_topic):
    topic = _topic_pair(make_topic, partitions=2)
    for p in range(2):
        produce(kafka_clusters["c1"].bootstrap, topic, _records(50, tag=f"p{p}-"), partition=p)
    src, dst = _clients(kafka_clusters)
    results = [copy_partition(_task(topic, p, 50, txn_records=20, exactly_once=False), src, dst) for p in range(2)]
    assert [(r.ok, r.copied, r.next_offset, r.transactions) for r in results] == [(True, 50, 50, 3)] * 2
    source = read_all(kafka_clusters["c1"].bootstrap, topic, 2)
    target = read_all(kafka_clusters["c2"].bootstrap, topic, 2)
    assert [(t.partition, t.key, t.value) for t in target] == [(s.partition, s.key, s.value) for s in source]
    assert all(t.header(copyflags.HEADER) == b"1" for t in target)
    assert [provenance.decode(t.header(provenance.HEADER)).offset for t in target] == [s.offset for s in source]

    again = [copy_partition(_task(topic, p, 50, exactly_once=False), src, dst) for p in range(2)]
    assert [(r.copied, r.start_offset) for r in again] == [(0, 50)] * 2
    # The checkpoint is the link's group as in exactly-once mode, so a link can switch modes.
    assert copy_partition(_task(topic, 0, 50), src, dst).start_offset == 50


def test_at_least_once_killed_mid_copy_loses_nothing_and_repeats_at_most_one_commit_interval(
        kafka_clusters, make_topic):
    topic = _topic_pair(make_topic)
    n = 60000
    produce(kafka_clusters["c1"].bootstrap, topic, _records(n, size=100))
    c1, c2 = kafka_clusters["c1"].bootstrap, kafka_clusters["c2"].bootstrap
    # Throttled to about 10 s for the whole range, so the kill lands mid-copy.
    proc = subprocess.Popen([sys.executable, "-c", _KILLABLE, c1, c2, topic, str(n), "c1.L1", "alo", "600000"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _kill_once(proc, lambda: _end_offset(c2, topic) >= 1000)  # no transactions: copies show as they land

    src, dst = _clients(kafka_clusters)
    result = copy_partition(_task(topic, 0, n, exactly_once=False), src, dst)
    assert result.ok and result.next_offset == n and 0 < result.start_offset < n and result.copied > 0
    values = Counter(r.value for r in read_all(c2, topic, 1))
    assert len(values) == n  # nothing lost
    duplicates = sum(values.values()) - n
    print(f"at-least-once kill: restarted at {result.start_offset}, {duplicates} duplicates")
    assert duplicates <= 200  # at most one commit interval (txn_records) is copied again


def _end_offset(bootstrap, topic):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    tp = TopicPartition(topic, 0)
    return admin.list_offsets({tp: OffsetSpec.latest()}, request_timeout=10)[tp].result().offset
