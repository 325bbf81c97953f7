"""The drill-down of a differing cell: which messages are missing on a cluster, and which it holds twice.

A tally says that a cell differs, not which messages make the difference. The
drill-down reads the cell's messages (one origin, one window of one topic) on the
origin and on the cluster, up to where each cluster was audited (so it compares
exactly what the tallies counted), and names them by origin partition and offset.
It reads from the first offset whose timestamp falls in the window
(``offsets_for_times``: no record of the window lies before it), which keeps it
to the window and what came after, not the whole retained log.

On a compacted topic each cluster's log cleaner removes superseded records on
its own schedule, so a cell's counts differ where nothing was lost. There the
drill-down also reads on to each partition's end, to know every key's later
records, and **excuses** a record one side lacks when that side holds a later
record with the same key (the cleaner removes a record only once a later one
with its key is in the log), or when it is a tombstone and that side holds no
earlier record of its key (an expired tombstone takes its key's history with it).
What it excuses is counted (``compacted``), never named; duplicates are never
excused. What is left is a loss of the latest value of a key, named as any other.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition

from mirrorflow import provenance
from mirrorflow.completeness.compare import Difference
from mirrorflow.completeness.store import Position
from mirrorflow.copy.state import CopyScanner
from mirrorflow.errors import KafkaOperationError
from mirrorflow.internal_names import AUDIT_DRILL_GROUP
from mirrorflow.kafka import ClusterClient, read_headers

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
    #: Records one side lacks that its compaction explains (compacted topics only; see the module).
    compacted: int = 0

    @property
    def excused(self) -> bool:
        """Every difference of the cell is compaction: nothing missing, duplicated or unexpected is left."""
        return not (self.missing_count or self.duplicated_count or self.unexpected_count)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out.update(out.pop("difference"))
        return out


@dataclass(frozen=True)
class _Seen:
    """A record the drill-down read of the cell: its key, its timestamp, whether it is a tombstone."""

    key: bytes | None
    timestamp_ms: int
    tombstone: bool


@dataclass
class _Side:
    """What one cluster holds of a cell, and (compacted topics) what it holds of every key after the cell began."""

    held: Counter[tuple[int, int]] = field(default_factory=Counter)
    records: dict[tuple[int, int], _Seen] = field(default_factory=dict)
    #: (partition, key) -> per origin cluster, the highest origin offset held; and the newest timestamp of any.
    later: dict[tuple[int, bytes], tuple[dict[str, int], int]] = field(default_factory=dict)

    def note_key(self, partition: int, key: bytes, origin: str, offset: int, timestamp_ms: int) -> None:
        offsets, newest = self.later.get((partition, key), ({}, -1))
        offsets[origin] = max(offsets.get(origin, -1), offset)
        self.later[(partition, key)] = (offsets, max(newest, timestamp_ms))

    def explains(self, origin: str, identity: tuple[int, int], seen: _Seen) -> bool:
        """Whether this side's compaction explains that it lacks ``identity`` (a record of ``origin``)."""
        if seen.key is None:
            return False  # a record without a key is never compacted away
        partition, offset = identity
        found = self.later.get((partition, seen.key))
        if found is None:
            return seen.tombstone  # a tombstone that expired took every earlier record of its key along
        offsets, newest = found
        if offsets.get(origin, -1) > offset:
            return True  # a later record of the same origin with the key
        return any(o != origin for o in offsets) and newest >= seen.timestamp_ms  # a later one of another origin


def drill(difference: Difference, clients: Mapping[str, ClusterClient],
          positions: Mapping[str, Mapping[tuple[str, int], Position]], window_s: int, timeout: float = 30.0,
          compacted: bool = False) -> Drill:
    """Name the messages behind ``difference`` (see the module); ``compacted``: the topic is compacted."""
    reference = _side(clients[difference.origin], difference, positions[difference.origin], window_s, timeout,
                      compacted)
    found = _side(clients[difference.cluster], difference, positions[difference.cluster], window_s, timeout,
                  compacted)
    missing = sorted(set(reference.held) - set(found.held))
    duplicated = sorted(i for i, n in found.held.items() if n > 1)
    unexpected = sorted(set(found.held) - set(reference.held))
    excused = 0
    if compacted:
        kept_missing = [i for i in missing if not found.explains(difference.origin, i, reference.records[i])]
        kept_unexpected = [i for i in unexpected if not reference.explains(difference.origin, i, found.records[i])]
        excused = len(missing) - len(kept_missing) + len(unexpected) - len(kept_unexpected)
        missing, unexpected = kept_missing, kept_unexpected
    return Drill(difference, len(missing), sum(found.held[i] - 1 for i in duplicated), len(unexpected),
                 [list(i) for i in missing[:NAMED]], [list(i) for i in duplicated[:NAMED]],
                 [list(i) for i in unexpected[:NAMED]], excused)


def _side(client: ClusterClient, cell: Difference, positions: Mapping[tuple[str, int], Position],
          window_s: int, timeout: float, compacted: bool) -> _Side:
    """What ``client``'s cluster holds of the cell: (origin partition, origin offset) -> how many times.

    Up to where the cluster was audited (what its tallies counted); on a compacted
    topic it reads on to the partition's end for the keys' later records.
    """
    start, stop = cell.window_ms, cell.window_ms + window_s * 1000
    partitions = sorted(p for (topic, p) in positions if topic == cell.topic)
    side = _Side()
    if not partitions:
        return side
    firsts = _first_offsets(client, cell.topic, partitions, start, timeout)
    with CopyScanner(client) as scanner:
        for p in partitions:
            first, audited = firsts.get(p), positions[(cell.topic, p)].next
            if first is None or (first >= audited and not compacted):
                continue
            for msg in scanner.messages(cell.topic, p, timeout, first=first, end=None if compacted else audited):
                _, ts = msg.timestamp()
                headers = read_headers(msg, client.name)
                identity = provenance.origin_of(headers, client.name, cell.topic, p, msg.offset())
                if compacted and msg.key() is not None and identity.topic == cell.topic:
                    side.note_key(p, msg.key(), identity.cluster, identity.offset, ts)
                if msg.offset() >= audited or not start <= ts < stop:
                    continue
                if identity.cluster == cell.origin and identity.topic == cell.topic:
                    at = (identity.partition, identity.offset)
                    side.held[at] += 1
                    if compacted:
                        side.records[at] = _Seen(msg.key(), ts, msg.value() is None)
    return side


def _first_offsets(client: ClusterClient, topic: str, partitions: list[int], timestamp_ms: int,
                   timeout: float) -> dict[int, int]:
    """Per partition, the first offset whose timestamp is at or after ``timestamp_ms`` (none: no such record)."""
    consumer = Consumer(client.consumer(AUDIT_DRILL_GROUP))
    try:
        answer = consumer.offsets_for_times([TopicPartition(client.physical(topic), p, timestamp_ms)
                                             for p in partitions],
                                            timeout=timeout)
    except KafkaException as exc:
        raise KafkaOperationError(client.name, f"offsets_for_times {topic}", exc.args[0]) from exc
    finally:
        consumer.close()
    return {tp.partition: tp.offset for tp in answer if tp.offset >= 0}
