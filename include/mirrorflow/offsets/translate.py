"""Offset translation: a portable position turned into the offset on this cluster where the group resumes.

In either precision: ``exact`` scans from a proven start for the first message
the owner's consumption has not covered; ``timestamp`` looks up the first message
at or after the last consumed one's time minus a margin.

The consumer group ``_mirrorflow.offsets.resolver`` that the timestamp lookup
uses keeps its name: it is a group on real clusters, and ACLs name it by the
``_mirrorflow`` prefix.
"""

from __future__ import annotations

from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaException, TopicPartition

from mirrorflow.errors import KafkaOperationError
from mirrorflow.internal_names import OFFSETS_TRANSLATE_GROUP
from mirrorflow.kafka import ClusterClient
from mirrorflow.offsets import frontier as _frontier
from mirrorflow.offsets.groups import parse_cut_metadata
from mirrorflow.offsets.position import Position


@dataclass(frozen=True)
class Translation:
    offset: int
    precision: str
    #: How it was found, for the log: where the scan started, or the timestamp looked up.
    how: str


def translate(client: ClusterClient, pos: Position, precision: str, margin_s: float, low: int, end: int,
              current: tuple[int, str] | None = None, *, scanner: _frontier.Scanner | None = None) -> Translation:
    """The offset on ``client``'s cluster where ``pos.group`` resumes ``pos.topic[pos.partition]``.

    ``low``/``end`` are this cluster's earliest and last stable offsets;
    ``current`` is the group's committed (offset, metadata) here, used as the
    scan start when it is a cut mirrorflow made from the same owner's earlier
    (not later) position, which is still proven consumed.
    """
    if precision == "timestamp":
        return _by_timestamp(client, pos, margin_s, low, end)
    start, how = low, f"scanned from the earliest offset {low}"
    if current is not None:
        made = parse_cut_metadata(current[1])
        if made is not None and made[0] == pos.owner and made[1] <= pos.offset and low <= current[0] <= end:
            start, how = current[0], f"scanned from the previous cut {current[0]}"
    cut = _frontier.first_unconsumed(client, pos.topic, pos.partition, pos.frontier, start, end, scanner=scanner)
    return Translation(cut, "exact", how)


def _by_timestamp(client: ClusterClient, pos: Position, margin_s: float, low: int, end: int) -> Translation:
    """Axual's rule: the first offset at or after (last consumed CreateTime - margin); the end if none."""
    if pos.timestamp_ms is None:
        if pos.offset == 0:
            return Translation(low, "timestamp", "nothing consumed yet: from the earliest offset")
        return Translation(low, "timestamp", "no consumed message retained on the owner: from the earliest offset")
    wanted = pos.timestamp_ms - int(margin_s * 1000)
    consumer = Consumer(client.consumer(OFFSETS_TRANSLATE_GROUP))
    try:
        [tp] = consumer.offsets_for_times([TopicPartition(client.physical(pos.topic), pos.partition, wanted)],
                                           timeout=30)
    except KafkaException as exc:
        raise KafkaOperationError(client.name, f"offsets for times {pos.topic}[{pos.partition}]",
                                  exc.args[0]) from exc
    finally:
        consumer.close()
    if tp.error is not None:
        raise KafkaOperationError(client.name, f"offsets for times {pos.topic}[{pos.partition}]", tp.error)
    offset = end if tp.offset < 0 else min(max(tp.offset, low), end)
    return Translation(offset, "timestamp", f"first message at or after {wanted} ms (last consumed "
                                            f"{pos.timestamp_ms} ms - {margin_s:g}s)")
