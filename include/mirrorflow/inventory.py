"""What a link has to work with: the selected topic-partitions of a source cluster.

This is the first half of planning (the copy planner of the level DAGs builds on
it): list the source's topics, keep those the topology selects, and read each
partition's watermarks. It only reads; nothing here changes a cluster.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from mirrorflow.kafka import admin
from mirrorflow.kafka.config import ClusterClient


@dataclass(frozen=True)
class PartitionSpan:
    topic: str
    partition: int
    low: int
    high: int

    @property
    def records(self) -> int:
        """Offsets between the watermarks (an upper bound: transaction markers use offsets too)."""
        return self.high - self.low


def selected_partitions(client: ClusterClient, topology) -> list[PartitionSpan]:
    """Watermarks of every partition of every topic the topology selects on ``client``'s cluster."""
    spans: list[PartitionSpan] = []
    for topic, count in sorted(admin.list_topics(client).items()):
        if not topology.selects(topic):
            continue
        for partition, (low, high) in enumerate(admin.watermarks(client, topic, count)):
            spans.append(PartitionSpan(topic, partition, low, high))
    return spans


def summarize(spans: list[PartitionSpan]) -> dict:
    return {
        "topics": len({s.topic for s in spans}),
        "partitions": len(spans),
        "offsets_available": sum(s.records for s in spans),
        "spans": [asdict(s) for s in spans],
    }
