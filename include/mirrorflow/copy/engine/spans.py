"""The target offsets a copy wrote between: the journal line's target span.

The producer reports failures only, so the span comes from the target
partition's end offsets before the first copy and after the last commit: a few
requests per range instead of a report per copy. Other producers' messages and
transaction markers may share the span; it bounds where the copies are.
"""

from __future__ import annotations

import logging

from confluent_kafka import OFFSET_END, Consumer, KafkaException, TopicPartition

from mirrorflow.copy.task import PartitionResult, PartitionTask

log = logging.getLogger(__name__)


def target_end(checkpoint: Consumer, task: PartitionTask, timeout: float) -> int | None:
    """The target partition's end offset (high watermark); ``None`` if it does not say."""
    return target_ends(checkpoint, task, [task.partition], timeout)[task.partition]


def target_ends(checkpoint: Consumer, task: PartitionTask, partitions: list[int], timeout: float
                ) -> dict[int, int | None]:
    """:func:`target_end` of several partitions of ``task``'s topic, in one request per leader.

    ``offsets_for_times`` with ``OFFSET_END`` answers what ``get_watermark_offsets``
    does (the end a reader of the consumer's isolation level sees) for many
    partitions at once; a transaction group asks for all of its partitions before
    and after its copy (docs/benchmarks.md tells what asking one by one cost).
    """
    out: dict[int, int | None] = dict.fromkeys(partitions)
    try:
        answer = checkpoint.offsets_for_times([TopicPartition(task.target_topic, p, OFFSET_END) for p in partitions],
                                              timeout=timeout)
    except KafkaException as exc:
        log.warning("%s %s%s: the target's end offsets, for the audit, are unknown: %s", task.link_id,
                    task.topic, partitions, exc.args[0])
        return out
    for tp in answer:
        if tp.error is not None or tp.offset < 0:
            log.warning("%s %s[%d]: the target's end offset, for the audit, is unknown: %s", task.link_id,
                        task.topic, tp.partition, tp.error or f"offset {tp.offset}")
        else:
            out[tp.partition] = tp.offset
    return out


def note_target_offsets(result: PartitionResult, before: int | None, after: int | None) -> None:
    """Widen the result's target span to ``[before, after - 1]``; a bound the target did not give stays unknown."""
    if result.target_first_offset is None and before is not None:
        result.target_first_offset = before
    if after is not None:
        result.target_last_offset = after - 1
