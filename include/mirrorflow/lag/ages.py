"""Seconds behind: the age of the first committed message a link or group has not reached yet.

A count of records says how much work is pending; the age of the oldest pending
message says how stale a reader of the target (or the group's consumer) is,
which is what an SLA is about. The age is read from the message's CreateTime
with one ``read_committed`` consumer per cluster that never commits
(:data:`LAG_READER_GROUP`).
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from confluent_kafka import TIMESTAMP_NOT_AVAILABLE, Consumer, KafkaError, KafkaException, TopicPartition

from mirrorflow.kafka.config import ClusterClient
from mirrorflow.lag.reach import Clusters
from mirrorflow.lag.rows import join_notes

#: Group id of the consumer that reads the oldest pending messages (it never commits).
LAG_READER_GROUP = "_mirrorflow.lag-reader"


def epoch_ms(now: datetime | None) -> int:
    """``now`` (default: the current time; naive means UTC) in milliseconds, the unit of a message's CreateTime."""
    now = now or datetime.now(UTC)
    if now.tzinfo is None:
        now = now.replace(tzinfo=UTC)
    return int(now.timestamp() * 1000)


@dataclass(frozen=True)
class _First:
    timestamp: int | None
    note: str | None = None


def fill_ages(reach: Clusters, rows: list, cluster_of: Callable[[Any], str], start_of: Callable[[Any], int],
              now_ms: int, timeout: float) -> None:
    """Set ``seconds`` and ``oldest_timestamp`` of pending rows from the first message at their start."""
    by_cluster: dict[str, list] = defaultdict(list)
    for row in rows:
        by_cluster[cluster_of(row)].append(row)
    for cluster, group in sorted(by_cluster.items()):
        wanted = {(r.topic, r.partition, start_of(r), r.end) for r in group}
        try:
            first = _first_messages(reach.clients[cluster], wanted, timeout)
        except KafkaException as exc:
            err = exc.args[0]
            note = f"age not read: {err.name()}: {err.str()}"
            for r in group:
                r.note = join_notes(r.note, note)
            continue
        for r in group:
            found = first.get((r.topic, r.partition, start_of(r)), _First(None, "age not read"))
            if found.note:
                r.note = join_notes(r.note, found.note)
            if found.timestamp is not None:
                r.oldest_timestamp = found.timestamp
                r.seconds = round(max(0.0, (now_ms - found.timestamp) / 1000.0), 3)
            elif found.note is None:  # only transaction markers or aborted records before the end
                r.seconds = 0.0


def _first_messages(client: ClusterClient, wanted: set[tuple[str, int, int, int]], timeout: float
                    ) -> dict[tuple[str, int, int], _First]:
    """The CreateTime of the first committed message at or after each ``(topic, partition, start)``.

    One ``read_committed`` consumer for the cluster; a partition asked for at
    several starts (links or groups at different positions) is read in several
    rounds. A message at or past ``end`` (all before it were aborted or markers)
    means nothing is pending: ``timestamp`` and ``note`` are both ``None``.
    """
    starts: dict[tuple[str, int], list[tuple[int, int]]] = defaultdict(list)
    for topic, partition, start, end in sorted(wanted):
        starts[(topic, partition)].append((start, end))
    rounds: list[dict[tuple[str, int], tuple[int, int]]] = []
    for key, items in starts.items():
        for i, item in enumerate(items):
            if len(rounds) <= i:
                rounds.append({})
            rounds[i][key] = item
    out: dict[tuple[str, int, int], _First] = {}
    for todo in rounds:
        pending = dict(todo)
        # a consumer per round: paused partitions of one round must not stay paused in the next
        consumer = Consumer(client.consumer(LAG_READER_GROUP, **{
            "enable.partition.eof": True,
            "max.partition.fetch.bytes": 65536,  # only the first message of each partition is wanted
        }))
        try:
            consumer.assign([TopicPartition(t, p, start) for (t, p), (start, _) in sorted(pending.items())])
            deadline = time.monotonic() + timeout
            while pending and time.monotonic() < deadline:
                for msg in consumer.consume(num_messages=min(500, len(pending) * 2), timeout=0.5):
                    key = (msg.topic(), msg.partition())
                    if key not in pending:
                        continue
                    start, end = pending[key]
                    err = msg.error()
                    if err is not None:
                        if err.code() == KafkaError._PARTITION_EOF:
                            out[(*key, start)] = _First(None)
                        elif err.retriable():
                            continue
                        else:
                            out[(*key, start)] = _First(None, f"age not read: {err.name()}: {err.str()}")
                    elif msg.offset() < start:
                        continue
                    elif msg.offset() >= end:
                        out[(*key, start)] = _First(None)
                    else:
                        ts_type, ts = msg.timestamp()
                        out[(*key, start)] = (_First(ts) if ts_type != TIMESTAMP_NOT_AVAILABLE
                                              else _First(None, "the message has no timestamp"))
                    pending.pop(key)
                    consumer.pause([TopicPartition(*key)])  # its first message is all that is wanted
        finally:
            consumer.close()
        for (t, p), (start, _) in pending.items():
            out[(t, p, start)] = _First(None, f"age not read: no message within {timeout:.0f}s")
    return out
