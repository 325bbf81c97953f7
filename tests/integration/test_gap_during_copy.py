"""Retention racing a copy: the source's log start moves past a running copy's reader (c1 -> c2, real brokers).

A copy's reader never jumps (``auto.offset.reset=error``): when ``delete_records``
(as retention does) removes what it has not read yet, the copy commits what it
read and decides the gap as at its start, per ``on_gap``. The source client here
prefetches little (librdkafka's 64 MB default would hide a small cut: what it
fetched before the deletion is still copied, rightly), and the copy is throttled,
so the cut lands far ahead of the reader.
"""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from mirrorflow.copy.engine.clients import CopyClients
from mirrorflow.copy.engine.group import copy_group
from mirrorflow.copy.engine.partition import copy_partition
from mirrorflow.copy.task import PartitionTask
from mirrorflow.copy.txn_groups import TXN_GROUPS
from mirrorflow.kafka.config import ClusterClient
from tests.integration.retention_gap import (
    CUT,
    LINK,
    RECORDS,
    SMALL_PREFETCH,
    checkpoint_of,
    fill_source,
    target_end,
    values_of,
)

pytestmark = pytest.mark.kafka

_pause = threading.Event()  # never set: .wait(t) paces the watch loop

def _task(topic, partition, **kw):
    return PartitionTask(link_id=LINK, level=1, source="c1", target="c2", topic=topic, partition=partition,
                         end_offset=RECORDS, max_bytes_per_second=1_500_000, txn_max_seconds=1.0, **kw)


def _cut_while_copying(kafka_clusters, topic, partition, copy):
    """Run ``copy()`` in a thread; once the target holds 2,000 copies, delete the source below ``CUT``."""
    box = {}
    worker = threading.Thread(target=lambda: box.setdefault("result", copy()), daemon=True)
    worker.start()
    deadline = time.monotonic() + 60
    while target_end(kafka_clusters["c2"].bootstrap, topic, partition) < 2000:
        assert worker.is_alive() and time.monotonic() < deadline, "the copy never got going"
        _pause.wait(0.05)
    admin = AdminClient({"bootstrap.servers": kafka_clusters["c1"].bootstrap})
    for future in admin.delete_records([TopicPartition(topic, partition, CUT)], request_timeout=30).values():
        assert future.result(timeout=30).low_watermark == CUT
    worker.join(120)
    assert not worker.is_alive()
    return box["result"]


@pytest.mark.parametrize("on_gap", ["fail", "skip"])
def test_a_log_start_moved_past_a_running_copy_stops_or_skips_by_name_never_in_silence(
        kafka_clusters, make_topic, on_gap):
    topic = make_topic("c1", partitions=1)
    make_topic("c2", partitions=1, name=topic)
    c1, c2 = kafka_clusters["c1"].bootstrap, kafka_clusters["c2"].bootstrap
    fill_source(c1, topic, 0)
    src = ClusterClient("c1", {"bootstrap.servers": c1, **SMALL_PREFETCH})
    dst = ClusterClient("c2", {"bootstrap.servers": c2})

    result = _cut_while_copying(kafka_clusters, topic, 0, lambda: copy_partition(_task(topic, 0, on_gap=on_gap),
                                                                                 src, dst))
    first, last = result.lost_offsets
    assert 2000 <= first < CUT and last == CUT - 1, result
    assert result.lost_to_retention == CUT - first and result.lost_ranges == [[first, CUT - 1]]
    held = values_of(c2, topic, 1, 0)
    if on_gap == "fail":
        assert result.error == (f"retention gap: offsets {first}..{CUT - 1} ({CUT - first}) are no longer on c1 and "
                                f"were never copied; the partition stops at {first} (on_gap: fail; on_gap: skip "
                                f"steps over them with a recorded loss)")
        assert (result.error_offset, result.next_offset, checkpoint_of(c2, topic, 0)) == (first, first, first)
        assert held == list(range(first))  # everything read before the cut, once, and nothing after it
    else:
        assert result.ok, result.error
        assert (result.next_offset, checkpoint_of(c2, topic, 0)) == (RECORDS, RECORDS)
        assert held == list(range(first)) + list(range(CUT, RECORDS))
        assert result.copied == len(held)


def test_in_a_transaction_group_the_partition_whose_log_moved_skips_and_the_other_copies_on(
        kafka_clusters, make_topic):
    partitions = TXN_GROUPS + 1  # partitions 0 and TXN_GROUPS share transaction group 0
    topic = make_topic("c1", partitions=partitions)
    make_topic("c2", partitions=partitions, name=topic)
    c1, c2 = kafka_clusters["c1"].bootstrap, kafka_clusters["c2"].bootstrap
    for p in (0, TXN_GROUPS):
        fill_source(c1, topic, p)
    src = ClusterClient("c1", {"bootstrap.servers": c1, **SMALL_PREFETCH})
    dst = ClusterClient("c2", {"bootstrap.servers": c2})
    pool = CopyClients()
    try:
        gap, fine = _cut_while_copying(kafka_clusters, topic, 0, lambda: copy_group(
            [_task(topic, p, on_gap="skip") for p in (0, TXN_GROUPS)], src, dst, clients=pool))
    finally:
        pool.close()
    assert gap.ok and fine.ok, (gap.error, fine.error)
    first = gap.lost_offsets[0]
    assert gap.lost_ranges == [[first, CUT - 1]] and 2000 <= first < CUT
    assert values_of(c2, topic, partitions, 0) == list(range(first)) + list(range(CUT, RECORDS))
    assert values_of(c2, topic, partitions, TXN_GROUPS) == list(range(RECORDS))
    assert (checkpoint_of(c2, topic, 0), checkpoint_of(c2, topic, TXN_GROUPS)) == (RECORDS, RECORDS)


def test_with_on_gap_restore_the_partition_stops_and_the_next_run_heals_the_range_from_the_archive(
        kafka_clusters, make_topic, s3_bucket):
    import re

    from mirrorflow.archive import ArchiveSpec, run_archive
    from mirrorflow.copy.job import run_job
    from mirrorflow.copy.spec import JobSpec, LinkJob

    topic = make_topic("c1", partitions=1)
    make_topic("c2", partitions=1, name=topic)
    c1, c2 = kafka_clusters["c1"].bootstrap, kafka_clusters["c2"].bootstrap
    fill_source(c1, topic, 0)
    settings = {"c1": {"bootstrap.servers": c1}, "c2": {"bootstrap.servers": c2}}
    archived = run_archive(ArchiveSpec(run_id="a1", clusters={"c1": settings["c1"]}, archived=("c1",),
                                       topics=(re.escape(topic),), location=s3_bucket))
    assert archived.ok and archived.count == RECORDS
    src = ClusterClient("c1", {"bootstrap.servers": c1, **SMALL_PREFETCH})
    dst = ClusterClient("c2", {"bootstrap.servers": c2})

    stopped = _cut_while_copying(kafka_clusters, topic, 0, lambda: copy_partition(_task(topic, 0, on_gap="restore"),
                                                                                  src, dst))
    first = stopped.error_offset
    assert stopped.lost_ranges == [[first, CUT - 1]] and checkpoint_of(c2, topic, 0) == first
    assert stopped.error.endswith("(on_gap: restore: the next run restores them from the archive of c1)")

    healed = run_job(JobSpec(level=1, run_id="heal", topics=(re.escape(topic),), clusters=settings,
                             links=(LinkJob("c1.L1", 1, "c1", "c2", on_gap="restore"),),
                             archive=s3_bucket.to_dict(), archived=("c1",)))
    assert healed.ok, healed.summary()["errors"]
    assert values_of(c2, topic, 1, 0) == list(range(RECORDS))  # once each: read before the cut, restored, read after
