"""The bounded range reader (mirrorflow.kafka.ranges) against a real broker (c1)."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from mirrorflow.errors import OffsetGone, ReadStalled
from mirrorflow.kafka.config import ClusterClient
from mirrorflow.kafka.ranges import RangeReader
from tests.integration.kafka_io import produce, stable_end_offsets

pytestmark = pytest.mark.kafka

#: Fetch as little as librdkafka allows and keep at most one message queued ahead of the reader, so
#: that what a test deletes in the middle of a read has not been fetched yet.
SMALL_FETCHES = {"message.max.bytes": 1000, "fetch.max.bytes": 1000, "max.partition.fetch.bytes": 1000,
                 "receive.message.max.bytes": 2000, "queued.min.messages": 1, "queued.max.messages.kbytes": 1,
                 "fetch.queue.backoff.ms": 5, "fetch.error.backoff.ms": 5}


def _client(kafka_clusters) -> ClusterClient:
    return ClusterClient("c1", {"bootstrap.servers": kafka_clusters["c1"].bootstrap})


def _transactions(bootstrap: str, topic: str, batches: list[tuple[int, bool]]) -> None:
    """Each ``(n, commit)``: n records in one transaction on partition 0, committed or aborted (a marker each)."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"ranges-test-{uuid.uuid4().hex}"})
    producer.init_transactions(30)
    for i, (n, commit) in enumerate(batches):
        producer.begin_transaction()
        for j in range(n):
            producer.produce(topic, key=b"k", value=f"t{i}-{j}".encode(), partition=0)
        assert producer.flush(30) == 0  # written before the abort, so that the log holds aborted records
        (producer.commit_transaction if commit else producer.abort_transaction)(30)


def _delete_records(bootstrap: str, topic: str, partition: int, before: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_records([TopicPartition(topic, partition, before)], request_timeout=30).values():
        assert future.result(timeout=30).low_watermark == before


def test_reads_exactly_the_range_over_transaction_markers_and_returns_at_the_partitions_end(kafka_clusters,
                                                                                            make_topic):
    bootstrap = kafka_clusters["c1"].bootstrap
    topic = make_topic("c1", partitions=2)
    # partition 0: 0-4 committed, 5 marker, 6-8 aborted, 9 marker, 10-13 committed, 14 marker
    _transactions(bootstrap, topic, [(5, True), (3, False), (4, True)])
    produce(bootstrap, topic, [(None, f"p1-{i}".encode(), None, None) for i in range(6)], partition=1)
    assert stable_end_offsets(bootstrap, topic, 2) == [15, 6]

    def offsets(reader, ranges, **kw):
        got: dict[int, list[int]] = {}
        for msg in reader.read(ranges, **kw):
            got.setdefault(msg.partition(), []).append(msg.offset())
        return got

    with RangeReader.open(_client(kafka_clusters), "_mirrorflow.test-ranges", timeout=30) as reader:
        started = time.monotonic()
        # ends past the last record (only a marker left): the partition's end finishes it, not the timeout
        assert offsets(reader, {(topic, 0): (2, 15), (topic, 1): (1, 4)}) == {0: [2, 3, 4, 10, 11, 12, 13],
                                                                             1: [1, 2, 3]}
        assert reader.positions() == {(topic, 0): 15, (topic, 1): 4}
        assert time.monotonic() - started < 15  # far below the 30 s a missed end would wait
        # an end right after aborted records: the next committed record (10) is past it
        assert offsets(reader, {(topic, 0): (0, 9)}) == {0: [0, 1, 2, 3, 4]}
        assert reader.position(topic, 0) == 9
        # the same reader, another range; an empty one reads nothing
        assert offsets(reader, {(topic, 0): (11, 13), (topic, 1): (3, 3)}) == {0: [11, 12]}
        # a partition's end below the range's end: waited on, then named (a probe may take it as an answer)
        with pytest.raises(ReadStalled, match=r"ended at 6, below that") as stalled:
            offsets(reader, {(topic, 1): (4, 9)}, timeout=1)
        assert (stalled.value.cluster, stalled.value.topic, stalled.value.partition, stalled.value.offset) == (
            "c1", topic, 1, 6)
        assert offsets(reader, {(topic, 1): (4, 9)}, until_log_end=True) == {1: [4, 5]}
        assert reader.log_end(topic, 1) == 6 and reader.position(topic, 1) == 6

    with RangeReader.open(_client(kafka_clusters), "_mirrorflow.test-ranges", isolation="read_uncommitted") as dirty:
        assert offsets(dirty, {(topic, 0): (0, 15)}) == {0: [0, 1, 2, 3, 4, 6, 7, 8, 10, 11, 12, 13]}


def test_records_deleted_under_a_read_stop_it_by_name_it_never_jumps(kafka_clusters, make_topic):
    bootstrap = kafka_clusters["c1"].bootstrap
    topic = make_topic("c1", partitions=2, config={"retention.ms": "-1"})
    # one record per batch (300 bytes), so that a small fetch holds two or three of them
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "batch.num.messages": 1})
    for p in (0, 1):
        for i in range(60):
            producer.produce(topic, value=f"p{p}-{i}".encode().ljust(300, b"."), partition=p)
            producer.poll(0)
    assert producer.flush(30) == 0
    assert stable_end_offsets(bootstrap, topic, 2) == [60, 60]

    with RangeReader.open(_client(kafka_clusters), "_mirrorflow.test-ranges", batch=1,
                          config=SMALL_FETCHES) as reader:
        read = []
        messages = reader.range(topic, 0, 0, 60)
        for msg in messages:
            read.append(msg.offset())
            if len(read) == 10:
                break
        # the log start moves past the reader's position, and past all it may have fetched ahead
        _delete_records(bootstrap, topic, 0, 60)
        with pytest.raises(OffsetGone) as gone:
            for msg in messages:
                read.append(msg.offset())
        error = gone.value
        assert (error.cluster, error.topic, error.partition) == ("c1", topic, 0)
        assert 10 <= error.offset < 60 and read == list(range(error.offset))  # nothing skipped
        assert f"offset {error.offset} of {topic}[0] is no longer on the cluster" in str(error)

        # a range that starts below the log start: named at once; with on_error, the other partitions go on
        _delete_records(bootstrap, topic, 1, 20)
        failed = {}
        got = [m.offset() for m in reader.read({(topic, 1): (5, 30)}, on_error=failed.__setitem__)]
        assert got == [] and isinstance(failed[(topic, 1)], OffsetGone) and failed[(topic, 1)].offset == 5
        with pytest.raises(OffsetGone, match=f"offset 5 of {topic}\\[1\\]"):
            list(reader.range(topic, 1, 5, 30))
        assert [m.offset() for m in reader.range(topic, 1, 20, 30)] == list(range(20, 30))
