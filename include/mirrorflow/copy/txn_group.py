"""Which partitions share a ``transactional.id``: the copier's transaction groups.

A protocol rule, kept apart from the clients so that the driver's planner (which
must never split a group across Spark tasks) uses the same rule without
importing confluent-kafka.
"""

from __future__ import annotations

from mirrorflow.internal_names import INTERNAL_TOPIC_PREFIX

#: Partitions of one topic that share a ``transactional.id``: partition ``p`` is in group
#: ``p // TXN_GROUP_PARTITIONS``. A group's ranges are copied by one thread, in transactions
#: that span its partitions (:mod:`mirrorflow.copy.group`). Why: every commit first waits
#: for the producer's acknowledgements, and while an idempotent librdkafka producer waits
#: after a burst, its broker thread spins (measured in docs/benchmarks.md); one id per
#: partition meant one such wait per partition per run, which cost 64 partitions of 10 KB
#: about 100 ms of CPU each on a two-core machine. A protocol constant, like the id's shape:
#: changing it changes which id fences which partition, so it must not change while a copy
#: of the old shape may still run.
TXN_GROUP_PARTITIONS = 16


def txn_group(topic: str, partition: int) -> tuple[str, int]:
    """The transaction group of a topic-partition: partitions in one group share a producer id."""
    return topic, partition // TXN_GROUP_PARTITIONS


def transactional_id(link_id: str, topic: str, partition: int) -> str:
    """Stable per transaction group, so a retry or a zombie copying any of its partitions is fenced.

    Derived from (link, topic, partition) only, never from the Spark task or thread:
    packing may change from run to run without two copies of a partition escaping
    each other's fencing.
    """
    return f"{INTERNAL_TOPIC_PREFIX}.{link_id}.{topic}.g{partition // TXN_GROUP_PARTITIONS}"
