"""A copy thread's kept clients (mirrorflow.copy.engine.clients) against real brokers: c1 source, c2 target.

A kept reader moves from one range to the next, possibly of another topic, after
having fetched past its previous range's end: the copies must still be exactly
each range's records, and a range that fails must leave nothing kept behind.
(librdkafka itself drops what an unassigned partition had fetched; the copier's
own check of each message's partition is a second line, which this test cannot
tell apart from the first.)
"""

from __future__ import annotations

import random

import pytest

from mirrorflow.copy.engine.clients import CopyClients
from mirrorflow.copy.engine.partition import copy_partition
from mirrorflow.copy.task import PartitionTask
from mirrorflow.kafka.config import ClusterClient
from tests.integration.kafka_io import produce, read_all

pytestmark = pytest.mark.kafka


def _task(topic, partition, end, **kw):
    return PartitionTask(link_id="c1.L1", level=1, source="c1", target="c2", topic=topic, partition=partition,
                         end_offset=end, **kw)


def _fill(kafka_clusters, make_topic, partitions, per_partition, tag):
    topic = make_topic("c1", partitions=partitions)
    make_topic("c2", partitions=partitions, name=topic)
    for p in range(partitions):
        produce(kafka_clusters["c1"].bootstrap, topic,
                [(b"k", f"{tag}-p{p}-{i}".encode(), [("app", b"x")], None) for i in range(per_partition)],
                partition=p)
    return topic


@pytest.mark.parametrize("exactly_once", [True, False], ids=["exactly-once", "at-least-once"])
def test_kept_clients_copy_each_range_exactly_across_partitions_and_topics(kafka_clusters, make_topic,
                                                                         exactly_once):
    first = _fill(kafka_clusters, make_topic, 3, 300, "a")
    second = _fill(kafka_clusters, make_topic, 2, 300, "b")
    src = ClusterClient("c1", {"bootstrap.servers": kafka_clusters["c1"].bootstrap})
    dst = ClusterClient("c2", {"bootstrap.servers": kafka_clusters["c2"].bootstrap})
    pool = CopyClients()
    # Each range stops 100 records short of its partition's end, so the reader has fetched
    # records beyond the range when it moves on to the next partition or topic.
    plan = [(first, 0), (first, 1), (second, 0), (first, 2), (second, 1)]
    try:
        for topic, p in plan:
            r = copy_partition(_task(topic, p, 200, txn_records=70, exactly_once=exactly_once), src, dst,
                               clients=pool)
            assert r.ok, r.error
            assert (r.start_offset, r.copied, r.next_offset) == (0, 200, 200)
            assert pool.kept() == {"readers": 1, "checkpoints": 1, "producers": 0 if exactly_once else 1}
    finally:
        pool.close()
    assert pool.kept() == {"readers": 0, "checkpoints": 0, "producers": 0}

    for topic, tag, partitions in ((first, "a", 3), (second, "b", 2)):
        copied = read_all(kafka_clusters["c2"].bootstrap, topic, partitions)
        for p in range(partitions):
            values = [r.value for r in copied if r.partition == p]
            assert values == [f"{tag}-p{p}-{i}".encode() for i in range(200)], f"{topic}[{p}]"


def test_a_failed_range_keeps_no_client(kafka_clusters, make_topic):
    topic = make_topic("c1", partitions=1)
    make_topic("c2", partitions=1, name=topic, config={"max.message.bytes": "2000"})
    too_large = random.Random(1).randbytes(5000)  # even compressed
    produce(kafka_clusters["c1"].bootstrap, topic, [(b"k", b"small", None, None), (b"k", too_large, None, None)])
    src = ClusterClient("c1", {"bootstrap.servers": kafka_clusters["c1"].bootstrap})
    dst = ClusterClient("c2", {"bootstrap.servers": kafka_clusters["c2"].bootstrap})
    pool = CopyClients()
    try:
        r = copy_partition(_task(topic, 0, 2, exactly_once=False), src, dst, clients=pool)
        assert not r.ok and r.error_offset == 1 and "MSG_SIZE_TOO_LARGE" in r.error
        assert pool.kept() == {"readers": 0, "checkpoints": 0, "producers": 0}
    finally:
        pool.close()
