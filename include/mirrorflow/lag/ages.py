"""Seconds behind: the age of the first committed message a link or group has not reached yet.

A count of records says how much work is pending; the age of the oldest pending
message says how stale a reader of the target (or the group's consumer) is,
which is what an SLA is about. The age is read from the message's CreateTime
with one ``read_committed`` consumer per cluster that never commits
(:data:`LAG_READER_GROUP`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from confluent_kafka import TIMESTAMP_NOT_AVAILABLE, KafkaException

from mirrorflow.errors import KafkaOperationError, ReadStalled
from mirrorflow.internal_names import LAG_READER_GROUP
from mirrorflow.kafka import ClusterClient, RangeReader
from mirrorflow.lag.reach import Clusters
from mirrorflow.lag.rows import join_notes


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
        except (KafkaException, KafkaOperationError) as exc:
            err = exc.args[0] if isinstance(exc, KafkaException) else exc.error
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


def fill_open_transactions(reach: Clusters, rows: list, cluster_of: Callable[[Any], str], now_ms: int,
                           timeout: float) -> None:
    """Set ``open_transaction_s`` of rows with records behind an open transaction: the age of its first record.

    The last stable offset is the first offset of the oldest open transaction, so
    the record there, read uncommitted, is that transaction's first: its
    CreateTime says how long the transaction has held the partition. Kafka's
    transaction admin calls would say it too, but the Python client has none.
    When the age cannot be read, ``seconds`` stays unknown (a bound in seconds
    then fails), as for any pending record of unknown age.
    """
    by_cluster: dict[str, list] = defaultdict(list)
    for row in rows:
        by_cluster[cluster_of(row)].append(row)
    for cluster, group in sorted(by_cluster.items()):
        wanted = {(r.topic, r.partition, r.end, r.high) for r in group}
        try:
            first = _first_messages(reach.clients[cluster], wanted, timeout, isolation="read_uncommitted")
        except (KafkaException, KafkaOperationError) as exc:
            err = exc.args[0] if isinstance(exc, KafkaException) else exc.error
            for r in group:
                r.note = join_notes(r.note, f"open transaction's age not read: {err.name()}: {err.str()}")
                r.seconds = r.seconds if r.end > r.start else None
            continue
        for r in group:
            found = first.get((r.topic, r.partition, r.end), _First(None, "open transaction's age not read"))
            if found.note:
                r.note = join_notes(r.note, found.note)
            if found.timestamp is None:
                if r.end <= r.start:
                    r.seconds = None
                continue
            r.open_transaction_s = round(max(0.0, (now_ms - found.timestamp) / 1000.0), 3)
            if r.seconds is None or r.end <= r.start or r.open_transaction_s > r.seconds:
                r.seconds = r.open_transaction_s  # the oldest record waiting is the transaction's first
                r.oldest_timestamp = found.timestamp


def _first_messages(client: ClusterClient, wanted: set[tuple[str, int, int, int]], timeout: float,
                    isolation: str = "read_committed") -> dict[tuple[str, int, int], _First]:
    """The CreateTime of the first committed message at or after each ``(topic, partition, start)``.

    One ``read_committed`` consumer for the cluster; a partition asked for at
    several starts (links or groups at different positions) is read in several
    rounds. A message at or past ``end`` (all before it were aborted or markers)
    means nothing is pending: ``timestamp`` and ``note`` are both ``None``.
    """
    starts: dict[tuple[str, int], list[tuple[int, int]]] = defaultdict(list)  # by the cluster's topic names
    logical: dict[str, str] = {}
    for topic, partition, start, end in sorted(wanted):
        logical[client.physical(topic)] = topic
        starts[(client.physical(topic), partition)].append((start, end))
    rounds: list[dict[tuple[str, int], tuple[int, int]]] = []
    for key, items in starts.items():
        for i, item in enumerate(items):
            if len(rounds) <= i:
                rounds.append({})
            rounds[i][key] = item
    out: dict[tuple[str, int, int], _First] = {}
    for todo in rounds:
        starts_of = {key: start for key, (start, _) in todo.items()}

        def failed(key: tuple[str, int], error: KafkaOperationError) -> None:
            if isinstance(error, ReadStalled):
                out[(*key, starts_of[key])] = _First(None, f"age not read: no message within {timeout:.0f}s")
            else:
                out[(*key, starts_of[key])] = _First(None, f"age not read: {error.code_name}: {error.detail}")

        # a reader per round: a partition stopped in one round must not stay paused in the next
        with RangeReader.open(client, LAG_READER_GROUP, isolation=isolation, timeout=timeout, batch=500, config={
                "max.partition.fetch.bytes": 65536}) as reader:  # only the first message of each partition is wanted
            for msg in reader.read(todo, on_error=failed):
                key = (msg.topic(), msg.partition())
                if (*key, starts_of[key]) in out:
                    continue  # a later message of a partition whose first one came in the same batch
                ts_type, ts = msg.timestamp()
                out[(*key, starts_of[key])] = (_First(ts) if ts_type != TIMESTAMP_NOT_AVAILABLE
                                               else _First(None, "the message has no timestamp"))
                reader.stop(*key)  # its first message is all that is wanted
        for key, start in starts_of.items():
            # at its end with no message: only transaction markers or aborted records before the end
            out.setdefault((*key, start), _First(None))
    return {(logical[t], p, start): first for (t, p, start), first in out.items()}
