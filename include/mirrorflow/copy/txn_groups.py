"""Which partitions share a ``transactional.id``: the copier's transaction groups.

A protocol rule, kept apart from the clients so that the driver's planner (which
must never split a group across Spark tasks) uses the same rule without
importing confluent-kafka.
"""

from __future__ import annotations

from mirrorflow.internal_names import INTERNAL_TOPIC_PREFIX
from mirrorflow.work import PartitionWork

#: Transaction groups per topic: partition ``p`` is in group ``p % TXN_GROUPS``, and the
#: partitions of a group share a ``transactional.id``. A group's ranges are copied by one
#: thread, in transactions that span its partitions (:mod:`mirrorflow.copy.engine.group`).
#:
#: Why groups: every commit first waits for the producer's acknowledgements, and an
#: idempotent librdkafka producer with only a few partitions in flight keeps its broker
#: thread waking up the whole time, so one producer per partition cost many-partition topics
#: much CPU. Why a modulus and not a size: consecutive-partition groups made a few-partition
#: topic one group, copied by one process. A fixed number of groups keeps a few-partition
#: topic spread over processes and gives a many-partition topic producers with many
#: partitions in flight; and ``p % TXN_GROUPS`` does not depend on the partition count, so
#: adding partitions to a topic never moves one to another id. The price: one topic is
#: copied by at most ``TXN_GROUPS`` threads at once (docs/benchmarks.md has the figures).
#:
#: A protocol constant, like the id's shape: changing it changes which id fences which
#: partition, so it must not change while a copy of the old shape may still run.
TXN_GROUPS = 4


def txn_group(topic: str, partition: int) -> tuple[str, int]:
    """The transaction group of a topic-partition: partitions in one group share a producer id."""
    return topic, partition % TXN_GROUPS


def transactional_id(link_id: str, topic: str, partition: int) -> str:
    """Stable per transaction group, so a retry or a zombie copying any of its partitions is fenced.

    Derived from (link, topic, partition) only, never from the Spark task or thread:
    packing may change from run to run without two copies of a partition escaping
    each other's fencing.
    """
    return f"{transactional_id_prefix(link_id)}{topic}.g{partition % TXN_GROUPS}"


def transactional_id_prefix(link_id: str) -> str:
    """What every ``transactional.id`` of a link's copies starts with (a prefixed ACL grants them all)."""
    return f"{INTERNAL_TOPIC_PREFIX}.{link_id}."


def txn_unit(work: PartitionWork) -> tuple[str, str, int]:
    """``pack``'s unit for copies: a transaction group, whose partitions one thread copies together.

    Copied by two tasks at once, a group's partitions would fence each other.
    """
    return (work.link_id, *txn_group(work.topic, work.partition))
