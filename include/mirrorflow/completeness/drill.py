"""The drill-down of a differing cell: which messages are missing on a cluster, and which it holds twice.

A tally says that a cell differs, not which messages make the difference. The
drill-down reads the cell's messages (one origin, one window of one topic) on the
origin and on the cluster, up to where each cluster was audited (so it compares
exactly what the tallies counted), and names them by origin partition and offset.
It reads from the first offset whose timestamp falls in the window
(``offsets_for_times``: no record of the window lies before it), which keeps it
to the window and what came after, not the whole retained log.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition

from mirrorflow import provenance
from mirrorflow.completeness.compare import Difference
from mirrorflow.completeness.store import Position
from mirrorflow.copy.state import CopyScanner
from mirrorflow.errors import KafkaOperationError
from mirrorflow.internal_names import AUDIT_DRILL_GROUP
from mirrorflow.kafka.config import ClusterClient

#: At most this many messages are named per list (the counts are always whole).
NAMED = 20


@dataclass(frozen=True)
class Drill:
    """A differing cell, by message: ``missing`` and ``duplicated`` as ``[origin partition, origin offset]``."""

    difference: Difference
    missing_count: int
    duplicated_count: int
    #: Messages on the cluster whose origin is the cell's but that the origin no longer holds (or never did).
    unexpected_count: int
    missing: list[list[int]]
    duplicated: list[list[int]]
    unexpected: list[list[int]]

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out.update(out.pop("difference"))
        return out


def drill(difference: Difference, clients: Mapping[str, ClusterClient],
          positions: Mapping[str, Mapping[tuple[str, int], Position]], window_s: int, timeout: float = 30.0) -> Drill:
    """Name the messages behind ``difference`` (see the module)."""
    reference = _identities(clients[difference.origin], difference, positions[difference.origin], window_s, timeout)
    held = _identities(clients[difference.cluster], difference, positions[difference.cluster], window_s, timeout)
    missing = sorted(set(reference) - set(held))
    duplicated = sorted(i for i, n in held.items() if n > 1)
    unexpected = sorted(set(held) - set(reference))
    return Drill(difference, len(missing), sum(held[i] - 1 for i in duplicated), len(unexpected),
                 [list(i) for i in missing[:NAMED]], [list(i) for i in duplicated[:NAMED]],
                 [list(i) for i in unexpected[:NAMED]])


def _identities(client: ClusterClient, cell: Difference, positions: Mapping[tuple[str, int], Position],
                window_s: int, timeout: float) -> Counter[tuple[int, int]]:
    """(origin partition, origin offset) -> how many times ``client``'s cluster holds it, in the cell."""
    start, stop = cell.window_ms, cell.window_ms + window_s * 1000
    partitions = sorted(p for (topic, p) in positions if topic == cell.topic)
    found: Counter[tuple[int, int]] = Counter()
    if not partitions:
        return found
    firsts = _first_offsets(client, cell.topic, partitions, start, timeout)
    with CopyScanner(client) as scanner:
        for p in partitions:
            first, end = firsts.get(p), positions[(cell.topic, p)].next
            if first is None or first >= end:
                continue
            for msg in scanner.messages(cell.topic, p, timeout, first=first, end=end):
                _, ts = msg.timestamp()
                if not start <= ts < stop:
                    continue
                identity = provenance.origin_of(msg.headers(), client.name, cell.topic, p, msg.offset())
                if identity.cluster == cell.origin and identity.topic == cell.topic:
                    found[(identity.partition, identity.offset)] += 1
    return found


def _first_offsets(client: ClusterClient, topic: str, partitions: list[int], timestamp_ms: int,
                   timeout: float) -> dict[int, int]:
    """Per partition, the first offset whose timestamp is at or after ``timestamp_ms`` (none: no such record)."""
    consumer = Consumer(client.consumer(AUDIT_DRILL_GROUP))
    try:
        answer = consumer.offsets_for_times([TopicPartition(topic, p, timestamp_ms) for p in partitions],
                                            timeout=timeout)
    except KafkaException as exc:
        raise KafkaOperationError(client.name, f"offsets_for_times {topic}", exc.args[0]) from exc
    finally:
        consumer.close()
    return {tp.partition: tp.offset for tp in answer if tp.offset >= 0}
