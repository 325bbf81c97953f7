"""Retention racing a copy: a source partition of ``RECORDS`` numbered records, cut below ``CUT`` while copying.

Shared by tests/integration/test_gap_during_copy.py and the level DAG's gap test
(tests/dags/test_level_dags.py). Values start with their six-digit sequence
number, so :func:`values_of` reads back which records a target holds.
"""

from __future__ import annotations

import time

from confluent_kafka import Consumer, TopicPartition

from mirrorflow.copy.state.checkpoints import checkpoint_group
from tests.integration.kafka_io import produce, read_all

LINK = "c1.L1"


RECORDS, CUT = 12_000, 9_000


#: A reader that holds little ahead of its position: about 64 records of 1 KB per fetch, 256 KB queued.
SMALL_PREFETCH = {"queued.max.messages.kbytes": 256, "max.partition.fetch.bytes": 65536}


def fill_source(bootstrap, topic, partition):
    base = int(time.time() * 1000) - 60_000
    produce(bootstrap, topic, [(f"k{i}".encode(), f"{i:06d}".encode() + b"x" * 1000, None, base + i)
                               for i in range(RECORDS)], partition=partition)


def target_end(bootstrap, topic, partition):
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "test-gap-watch"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10, cached=False)[1]
    finally:
        consumer.close()


def checkpoint_of(bootstrap, topic, partition):
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": checkpoint_group(LINK)})
    try:
        return consumer.committed([TopicPartition(topic, partition)], timeout=30)[0].offset
    finally:
        consumer.close()


def values_of(bootstrap, topic, partitions, partition):
    return [int(r.value[:6]) for r in read_all(bootstrap, topic, partitions) if r.partition == partition]
