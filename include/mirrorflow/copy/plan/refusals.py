"""Partitions a plan stops alone, each with its reason named: the link's other partitions are planned.

A partition the plan must read first and cannot, a source partition without a
leader, a source that ends below the link's checkpoint: each becomes a
:class:`~mirrorflow.copy.spec.PartitionError` that says what happened, on which
cluster, and that nothing was written.
"""

from __future__ import annotations

import logging

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from mirrorflow.copy.spec import JobSpec, LinkJob, PartitionError, link_fields
from mirrorflow.copy.state.history import shorter
from mirrorflow.errors import KafkaOperationError
from mirrorflow.journal import journal_warning
from mirrorflow.kafka import LEADERLESS

log = logging.getLogger(__name__)


def unplannable(link: LinkJob, tp: TopicPartition, asked: str, exc: Exception) -> PartitionError:
    """A partition the plan must read first and cannot: it stops alone, the link's others copy on.

    A mirrorflow error names its cluster. A bare client error is the target's: the
    source's offsets of every partition were read just before, and a target
    partition without a leader is the usual reason.
    """
    error = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
    leaderless = isinstance(error, KafkaError) and error.code() in LEADERLESS
    cluster = exc.cluster if isinstance(exc, KafkaOperationError) else link.target
    why = "it has no leader (its broker is down?)" if leaderless else f"{type(exc).__name__}: {exc}"
    text = (f"{cluster} {tp.topic}[{tp.partition}] could not be read to learn {asked}: {why}; not copied in "
            f"this run, nothing written; the link's other partitions copy on")
    log.error("%s %s[%d]: %s", link.link_id, tp.topic, tp.partition, text)
    return PartitionError(link.link_id, link.source, link.target, tp.topic, tp.partition, None, text)


def leaderless_source(link: LinkJob, key: tuple[str, int], error: KafkaError) -> PartitionError:
    """A source partition without a leader: its offsets cannot be read, so it stops alone; the link copies on."""
    topic, partition = key
    text = (f"{link.source} {topic}[{partition}] has no leader (its broker is down?): its offsets could not be "
            f"read ({error.name()}); not copied in this run, nothing written; the link's other partitions copy on")
    log.error("%s %s[%d]: %s", link.link_id, topic, partition, text)
    return PartitionError(link.link_id, link.source, link.target, topic, partition, None, text)


def truncated(spec: JobSpec, link: LinkJob, tp: TopicPartition, committed: int, end: int) -> PartitionError:
    """A source partition that ends below the link's checkpoint: it lost offsets the link copied."""
    journal_warning("truncated", run_id=spec.run_id, link=link_fields(link), topic=tp.topic, partition=tp.partition,
                    checkpoint=committed, source_end=end, diverged_at=end)
    return PartitionError(link.link_id, link.source, link.target, tp.topic, tp.partition, committed,
                          shorter(link.link_id, link.source, tp.topic, tp.partition, committed, end))
