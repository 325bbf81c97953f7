"""Transaction groups (mirrorflow.copy.engine.group) against real brokers: c1 source, c2 target.

A group's partitions share one producer, one ``transactional.id`` and one transaction
per commit. These tests check that each partition still gets exactly its range, that a
refusal still stops only its own partition at its exact offset, and that fencing still
covers every partition of the group.
"""

from __future__ import annotations

import threading
from collections import Counter

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from mirrorflow.copy.engine.clients import CopyClients
from mirrorflow.copy.engine.executor import by_txn_group, copy_tasks, large
from mirrorflow.copy.engine.group import copy_group
from mirrorflow.copy.state.checkpoints import EARLIEST, checkpoint_group
from mirrorflow.copy.task import PartitionTask
from mirrorflow.copy.txn_groups import TXN_GROUPS, transactional_id
from mirrorflow.defaults import LARGE_GROUP_RECORDS
from mirrorflow.kafka.config import ClusterClient
from tests.integration.kafka_io import produce, read_all

pytestmark = pytest.mark.kafka

LINK = "c1.L1"
G = TXN_GROUPS


def members(n: int) -> list[int]:
    """``n`` partitions of transaction group 0: 0, G, 2G, ... (a topic needs ``G * n`` partitions)."""
    return [i * G for i in range(n)]


def _task(topic, partition, end, **kw):
    return PartitionTask(link_id=LINK, level=1, source="c1", target="c2", topic=topic, partition=partition,
                         end_offset=end, **kw)


def _clients(kafka_clusters):
    return (ClusterClient("c1", {"bootstrap.servers": kafka_clusters["c1"].bootstrap}),
            ClusterClient("c2", {"bootstrap.servers": kafka_clusters["c2"].bootstrap}))


def _fill(kafka_clusters, make_topic, partitions, per_partition, target_config=None):
    topic = make_topic("c1", partitions=partitions)
    make_topic("c2", partitions=partitions, name=topic, config=target_config)
    for p in range(partitions):
        produce(kafka_clusters["c1"].bootstrap, topic,
                [(b"k", f"p{p}-{i}".encode(), [("app", b"x")], None) for i in range(per_partition)], partition=p)
    return topic


def _checkpoints(bootstrap, topic, partitions: list[int]):
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": checkpoint_group(LINK)})
    try:
        return [tp.offset for tp in consumer.committed([TopicPartition(topic, p) for p in partitions], timeout=30)]
    finally:
        consumer.close()


def _target_ends(bootstrap, topic, partitions: list[int]) -> dict[int, int]:
    """High watermarks (markers included), asked one partition at a time, unlike the copier."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "test-ends",
                         "isolation.level": "read_uncommitted"})
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in partitions}
    finally:
        consumer.close()


def _copy(tasks, kafka_clusters):
    pool = CopyClients()
    try:
        return copy_group(tasks, *_clients(kafka_clusters), clients=pool)
    finally:
        pool.close()


@pytest.mark.parametrize("exactly_once", [True, False], ids=["exactly-once", "at-least-once"])
def test_a_group_copies_each_partition_exactly_its_range_in_shared_transactions(kafka_clusters, make_topic,
                                                                              exactly_once):
    topic = _fill(kafka_clusters, make_topic, G * 5, 400)
    group = members(5)
    # Ranges of different lengths, each stopping short of its partition's end (the reader
    # fetches past them), one empty: every partition must stop exactly at its own end.
    ends = dict(zip(group, [300, 400, 0, 150, 399]))
    tasks = [_task(topic, p, ends[p], txn_records=120, exactly_once=exactly_once) for p in group]
    results = _copy(tasks, kafka_clusters)

    assert [r.partition for r in results] == group
    for r in results:
        assert r.ok, r.error
        assert (r.start_offset, r.copied, r.next_offset) == (0, ends[r.partition], ends[r.partition])
    # Transactions of at most 120 records over all partitions together: far fewer than per partition.
    assert max(r.transactions for r in results) < sum(-(-end // 120) for end in ends.values())
    assert _checkpoints(kafka_clusters["c2"].bootstrap, topic, group) == [300, 400, -1001, 150, 399]

    target = read_all(kafka_clusters["c2"].bootstrap, topic, G * 5)
    for p in range(G * 5):
        assert [r.value for r in target if r.partition == p] == [f"p{p}-{i}".encode() for i in range(ends.get(p, 0))]
    # The audit's target span of each partition: from its end before the copy to its end after,
    # read for the whole group at once; none where nothing moved. Exactly once, the last commit's
    # marker may land after the end is read (the coordinator writes it once the commit returns).
    first_ends = _target_ends(kafka_clusters["c2"].bootstrap, topic, group)
    marker = 1 if exactly_once else 0
    assert [(r.target_first_offset, r.target_last_offset) for r in results] == [
        (0, first_ends[p] - 1 - (marker if r.target_last_offset == first_ends[p] - 1 - marker else 0))
        if ends[p] else (None, None) for p, r in zip(group, results)]

    again = _copy([_task(topic, p, 400, exactly_once=exactly_once) for p in group], kafka_clusters)
    assert [(r.start_offset, r.copied) for r in again] == [(ends[p], 400 - ends[p]) for p in group]
    second_ends = _target_ends(kafka_clusters["c2"].bootstrap, topic, group)
    assert [(r.target_first_offset, r.target_last_offset) for r in again] == [
        (first_ends[p], second_ends[p] - 1 - (marker if r.target_last_offset == second_ends[p] - 1 - marker else 0))
        if ends[p] < 400 else (None, None) for p, r in zip(group, again)]
    values = Counter(r.value for r in read_all(kafka_clusters["c2"].bootstrap, topic, G * 5))
    assert len(values) == 2000 and set(values.values()) == {1}


@pytest.mark.parametrize("exactly_once", [True, False], ids=["exactly-once", "at-least-once"])
def test_a_refused_copy_stops_only_its_partition_at_its_offset(kafka_clusters, make_topic, exactly_once):
    # A compacted target refuses a record without a key; the group's transaction is aborted
    # and each partition goes on by itself, where the refusal is found at its exact offset.
    topic = make_topic("c1", partitions=G * 3)
    make_topic("c2", partitions=G * 3, name=topic, config={"cleanup.policy": "compact"})
    group = members(3)
    for p in group:
        records = [(f"k{i}".encode(), f"p{p}-{i}".encode(), None, None) for i in range(50)]
        if p == group[1]:
            records[37] = (None, b"no-key", None, None)
        produce(kafka_clusters["c1"].bootstrap, topic, records, partition=p)
    results = _copy([_task(topic, p, 50, exactly_once=exactly_once) for p in group], kafka_clusters)

    assert results[0].ok and results[2].ok, (results[0].error, results[2].error)
    assert [(r.next_offset, r.copied) for r in (results[0], results[2])] == [(50, 50), (50, 50)]
    assert not results[1].ok
    assert (results[1].error_offset, results[1].next_offset, results[1].copied) == (37, 37, 37), results[1].error
    assert "source offset 37" in results[1].error
    target = read_all(kafka_clusters["c2"].bootstrap, topic, G * 3)
    by_partition = {p: [r.value for r in target if r.partition == p] for p in group}
    for p, end in zip(group, (50, 37, 50)):
        if exactly_once:
            assert by_partition[p] == [f"p{p}-{i}".encode() for i in range(end)]
        else:  # at least once may repeat what the aborted attempt had acknowledged, never lose
            assert set(by_partition[p]) == {f"p{p}-{i}".encode() for i in range(end)}
    assert _checkpoints(kafka_clusters["c2"].bootstrap, topic, group) == [50, 37, 50]


def test_the_group_id_fences_a_zombie_of_any_of_its_partitions(kafka_clusters, make_topic):
    topic = _fill(kafka_clusters, make_topic, G * 3, 100)
    group = members(3)
    # A zombie copy of the group's last partition (same link, same group, so the same id) with
    # an open transaction holding a copy the new attempt must never let through.
    zombie = Producer({"bootstrap.servers": kafka_clusters["c2"].bootstrap,
                       "transactional.id": transactional_id(LINK, topic, group[-1])})
    zombie.init_transactions(30)
    zombie.begin_transaction()
    zombie.produce(topic, b"zombie", b"k", partition=group[-1])
    assert zombie.flush(30) == 0

    results = _copy([_task(topic, p, 100) for p in group], kafka_clusters)
    assert all(r.ok and r.copied == 100 for r in results), [r.error for r in results]
    with pytest.raises(Exception, match="(?i)fenc|epoch"):
        zombie.commit_transaction(30)
    target = read_all(kafka_clusters["c2"].bootstrap, topic, G * 3)
    assert b"zombie" not in {r.value for r in target}
    assert Counter(r.partition for r in target) == {p: 100 for p in group}


def test_two_attempts_of_one_group_at_once_copy_each_record_once(kafka_clusters, make_topic):
    topic = _fill(kafka_clusters, make_topic, G * 3, 3000)
    group = members(3)
    results: list = []

    def attempt() -> None:
        results.append(_copy([_task(topic, p, 3000, txn_records=200) for p in group], kafka_clusters))

    threads = [threading.Thread(target=attempt) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not any(t.is_alive() for t in threads)
    # Whatever the fenced attempt reports, a third one finishes the job and nothing is doubled.
    final = _copy([_task(topic, p, 3000) for p in group], kafka_clusters)
    assert all(r.ok and r.next_offset == 3000 for r in final), [r.error for r in final]
    values = Counter(r.value for r in read_all(kafka_clusters["c2"].bootstrap, topic, G * 3))
    assert len(values) == 9000 and set(values.values()) == {1}


def test_an_onboarding_start_with_nothing_to_copy_is_still_committed(kafka_clusters, make_topic):
    topic = _fill(kafka_clusters, make_topic, G * 2, 10)
    a, b = members(2)
    # The first starts at its end (nothing to copy), the second from the earliest offset.
    results = _copy([_task(topic, a, 10, start_offset=10), _task(topic, b, 10, start_offset=EARLIEST)],
                    kafka_clusters)
    assert all(r.ok and r.initialised for r in results), [r.error for r in results]
    assert [(r.start_offset, r.copied) for r in results] == [(10, 0), (0, 10)]
    assert _checkpoints(kafka_clusters["c2"].bootstrap, topic, [a, b]) == [10, 10]


def test_a_byte_budget_stops_each_partition_of_the_group(kafka_clusters, make_topic):
    topic = _fill(kafka_clusters, make_topic, G * 2, 200)  # values of 4-7 bytes, key of 1
    group = members(2)
    results = _copy([_task(topic, p, 200, max_bytes=500) for p in group], kafka_clusters)
    for r in results:
        assert r.ok and 500 <= r.bytes < 520 and 0 < r.next_offset < 200, (r.error, r.bytes, r.next_offset)
    assert _checkpoints(kafka_clusters["c2"].bootstrap, topic, group) == [r.next_offset for r in results]


def test_copy_group_refuses_ranges_of_two_groups():
    tasks = [_task("orders", 0, 10), _task("orders", 1, 10)]
    with pytest.raises(ValueError, match="one transaction group"):
        copy_group(tasks, ClusterClient("c1", {"bootstrap.servers": "127.0.0.1:1"}),
                   ClusterClient("c2", {"bootstrap.servers": "127.0.0.1:1"}), clients=CopyClients())


@pytest.mark.parametrize("planned", [0, LARGE_GROUP_RECORDS // 2], ids=["small-groups", "large-groups"])
def test_the_executor_copies_groups_and_never_splits_one(kafka_clusters, make_topic, planned):
    # Planned as large (the two-partition groups reach LARGE_GROUP_RECORDS), those groups
    # are copied one at a time beside the small ones; either way each range exactly once.
    partitions = TXN_GROUPS + 2  # two groups of two partitions, the others of one
    topic = _fill(kafka_clusters, make_topic, partitions, 50)
    tasks = [_task(topic, p, 50, planned_records=planned) for p in range(partitions)]
    assert sum(map(large, by_txn_group(tasks))) == (2 if planned else 0)
    groups = by_txn_group(tasks)
    assert [[t.partition for t in g] for g in groups] == [[0, TXN_GROUPS], [1, TXN_GROUPS + 1]] + [
        [p] for p in range(2, TXN_GROUPS)]
    clusters = {"c1": {"bootstrap.servers": kafka_clusters["c1"].bootstrap},
                "c2": {"bootstrap.servers": kafka_clusters["c2"].bootstrap}}
    results = list(copy_tasks(clusters, tasks, threads=4))
    assert sorted(r["partition"] for r in results) == list(range(partitions))
    assert all(r["error"] is None and r["copied"] == 50 for r in results)
    values = Counter(r.value for r in read_all(kafka_clusters["c2"].bootstrap, topic, partitions))
    assert len(values) == 50 * partitions and set(values.values()) == {1}


def test_an_onboarding_start_survives_a_refusal_in_the_same_transaction(kafka_clusters, make_topic):
    # Partition 0 only needs its onboarding start committed; partition 1 holds a copy the
    # compacted target refuses. The aborted group transaction took partition 0's commit
    # along: the per-partition path must make it again, or the link would start over.
    topic = make_topic("c1", partitions=G * 2)
    make_topic("c2", partitions=G * 2, name=topic, config={"cleanup.policy": "compact"})
    a, b = members(2)
    produce(kafka_clusters["c1"].bootstrap, topic, [(b"k", b"v0", None, None)] * 5, partition=a)
    produce(kafka_clusters["c1"].bootstrap, topic, [(b"k", b"v1", None, None)] * 3 + [(None, b"no-key", None, None)],
            partition=b)
    results = _copy([_task(topic, a, 5, start_offset=5), _task(topic, b, 4, start_offset=EARLIEST)], kafka_clusters)
    assert results[0].ok and results[0].initialised, results[0].error
    assert (results[1].error_offset, results[1].next_offset) == (3, 3), results[1].error
    assert _checkpoints(kafka_clusters["c2"].bootstrap, topic, [a, b]) == [5, 3]
